"""The multipart field names Python's parsers read in a body: Werkzeug (Flask), python-multipart
(Starlette and FastAPI) and multipart (Bottle's). For tests/it/overrides.rs, which checks that
every body a parser reads a `_method` field in is refused by sdkbox.

Reads JSON lines {"content_type", "body"} on stdin and prints, for each, one JSON line
{"werkzeug": [...], "python-multipart": [...], "multipart": [...]}: the field and file names
each parser read, in order (those read before it gave up, if it did).
"""

import io
import json
import sys

import multipart
import python_multipart
from werkzeug.test import EnvironBuilder
from werkzeug.wrappers import Request


def werkzeug_names(content_type, body):
    environ = EnvironBuilder(
        method="POST", input_stream=io.BytesIO(body), content_type=content_type,
        content_length=len(body),
    ).get_environ()
    request = Request(environ)
    try:
        return list(request.form.keys()) + list(request.files.keys())
    except Exception:
        return []


def python_multipart_names(content_type, body):
    seen = []
    headers = {"Content-Type": content_type, "Content-Length": str(len(body))}
    try:
        python_multipart.parse_form(
            headers, io.BytesIO(body),
            lambda field: seen.append(field.field_name.decode("latin-1")),
            lambda file: seen.append((file.field_name or b"").decode("latin-1")),
        )
    except Exception:
        pass
    return seen


def multipart_names(content_type, body):
    environ = {
        "REQUEST_METHOD": "POST", "CONTENT_TYPE": content_type,
        "CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body),
    }
    try:
        forms, files = multipart.parse_form_data(environ, strict=False)
        return list(forms.keys()) + list(files.keys())
    except Exception:
        return []


for line in sys.stdin:
    if not line.strip():
        continue
    request = json.loads(line)
    body = request["body"].encode("utf-8")
    content_type = request["content_type"]
    print(json.dumps({
        "werkzeug": werkzeug_names(content_type, body),
        "python-multipart": python_multipart_names(content_type, body),
        "multipart": multipart_names(content_type, body),
    }), flush=True)
