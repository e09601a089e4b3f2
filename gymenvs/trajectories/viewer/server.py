"""`ViewerServer`: the viewer's pages and data over HTTP on a local port, from the standard library's server.

It answers only what the page asks for: `/` (the page), `/assets/viewer.js` and `/assets/viewer.css`,
`/api/run` (the run's rows) and `/api/episode/N`. Nothing is fetched from elsewhere: the page works offline.
It listens on 127.0.0.1 unless told otherwise; the files are read when asked for, never written.
"""

from __future__ import annotations

import json
import re
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from gymenvs.core.errors import ReplayFileError
from gymenvs.trajectories.viewer.pages import ASSETS, Decoder, asset, episode_data, run_data, standalone_html
from gymenvs.trajectories.viewer.run import Run

_EPISODE = re.compile(r"/api/episode/(\d+)")
_EXPORT = re.compile(r"/export/(\d+)\.html")
_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css"}


class ViewerServer:
    """Serves `run` at `url` (`port=0` takes a free port). `serve_forever()` in the foreground, or `start()` in a
    thread of its own; `close()` stops it."""

    def __init__(self, run: Run, *, host: str = "127.0.0.1", port: int = 0, decode: Decoder | None = None):
        self.run, self.decode = run, decode
        self._http = ThreadingHTTPServer((host, port), _handler_for(self))
        self._http.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}/"

    def serve_forever(self) -> None:
        self._http.serve_forever()

    def start(self) -> ViewerServer:
        self._thread = threading.Thread(target=self._http.serve_forever, name="gymenvs-viewer", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        if self._thread is not None:
            self._http.shutdown()
            self._thread.join()
            self._thread = None
        self._http.server_close()

    def __enter__(self) -> ViewerServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def answer(self, path: str) -> tuple[HTTPStatus, str, bytes]:
        """The status, content type and body for a GET of `path`."""
        path = path.split("?", 1)[0]
        if path in ("/", "/index.html"):
            return _text("index.html")
        if path.removeprefix("/assets/") in ASSETS:
            return _text(path.removeprefix("/assets/"))
        if path == "/api/run":
            self.run.refresh()  # a run still being written shows its new episodes
            return _json(run_data(self.run))
        match = _EPISODE.fullmatch(path) or _EXPORT.fullmatch(path)
        try:
            if match is None:
                raise KeyError(path)
            if match.re is _EXPORT:
                return HTTPStatus.OK, "text/html; charset=utf-8", standalone_html(self.run, int(match[1]), self.decode).encode()
            return _json(episode_data(self.run, int(match[1]), self.decode))
        except KeyError:
            return _json({"error": f"not found: {path}"}, HTTPStatus.NOT_FOUND)
        except ReplayFileError as exc:
            return _json({"error": str(exc)}, HTTPStatus.UNPROCESSABLE_ENTITY)


def _text(name: str) -> tuple[HTTPStatus, str, bytes]:
    suffix = name[name.rfind("."):]
    return HTTPStatus.OK, f"{_TYPES[suffix]}; charset=utf-8", asset(name).encode()


def _json(data: Any, status: HTTPStatus = HTTPStatus.OK) -> tuple[HTTPStatus, str, bytes]:
    return status, "application/json", json.dumps(data, ensure_ascii=False).encode()


def _handler_for(server: ViewerServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
            status, content_type, body = server.answer(self.path)
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # a request is not news
            pass

    return Handler
