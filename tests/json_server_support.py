"""A JSON-over-HTTP server on loopback for tests: subclasses answer `route(method, path, body)`."""

from __future__ import annotations

import http.server
import json
import threading


class LocalJSONServer:
    """Serves GET and POST on 127.0.0.1 (a free port) in a daemon thread; `route` returns (status, payload)."""

    def start(self) -> str:
        """Start serving; return `http://127.0.0.1:<port>`."""
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def do_GET(self):
                self._reply(*server.route("GET", self.path, None))

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                self._reply(*server.route("POST", self.path, body))

            def _reply(self, status, payload):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def route(self, method: str, path: str, body: dict | None) -> tuple[int, dict]:
        raise NotImplementedError

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
