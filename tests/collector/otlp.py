"""An OTLP/HTTP trace receiver for the tests: what a collector does on port 4318, decoded with
the OpenTelemetry project's own protobuf definitions (opentelemetry-proto), so spans sdkbox
exports are read as any collector would read them.

Listens on 127.0.0.1 (a free port), prints `listening PORT` on stdout, then one JSON line per
span received on POST /v1/traces: {"name", "trace_id", "span_id", "parent_span_id", "kind",
"status", "service", "attributes"}. A body that does not decode is answered 400 and printed
as {"error": ...}.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


def value(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def emit(line):
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path != "/v1/traces" or self.headers.get("Content-Type") != "application/x-protobuf":
            emit({"error": f"unexpected {self.path} {self.headers.get('Content-Type')}"})
            self.send_response(404)
            self.end_headers()
            return
        request = ExportTraceServiceRequest()
        try:
            request.ParseFromString(body)
        except DecodeError as error:
            emit({"error": f"undecodable: {error}"})
            self.send_response(400)
            self.end_headers()
            return
        for resource_spans in request.resource_spans:
            resource = {a.key: value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    emit({
                        "name": span.name,
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent_span_id": span.parent_span_id.hex(),
                        "kind": span.kind,
                        "status": span.status.code,
                        "service": resource.get("service.name"),
                        "attributes": {a.key: value(a.value) for a in span.attributes},
                    })
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
sys.stdout.write(f"listening {server.server_address[1]}\n")
sys.stdout.flush()
server.serve_forever()
