# The method Rack 2.2 (Debian's ruby-rack, as Rails and Sinatra mount it) runs a request as,
# behind Rack::MethodOverride: for tests/it/overrides.rs, which checks that every request
# Rack would run as another method is refused by sdkbox.
#
# Reads JSON lines {"method", "path", "content_type", "body"} on stdin and prints, for each,
# one JSON line {"method": the method the app saw, or "error: ..." when Rack failed}.
require "json"
require "rack"

app = Rack::MethodOverride.new(->(env) { [200, {}, [env["REQUEST_METHOD"]]] })
STDOUT.sync = true
STDIN.each_line do |line|
  request = JSON.parse(line)
  env = Rack::MockRequest.env_for(
    request["path"],
    method: request["method"],
    input: request["body"],
    "CONTENT_TYPE" => request["content_type"]
  )
  begin
    _status, _headers, body = app.call(env)
    seen = +""
    body.each { |part| seen << part }
    puts JSON.generate({ method: seen })
  rescue StandardError => e
    puts JSON.generate({ method: "error: #{e.class}" })
  end
end
