#!/usr/bin/env python3
"""A small fake GitHub for bench/compare.sh: answers the calls a closer run
start makes under --dry-run (writes are recorded by closer, never sent), so
label triggers start real runs without the internet.

    python3 bench/fake_github.py PORT

Counts each request by method and route kind; GET /_stats prints them.
"""
import json
import re
import sys
import threading
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STATS = {}
LOCK = threading.Lock()


def count(key):
    with LOCK:
        STATS[key] = STATS.get(key, 0) + 1


def issue(number):
    return {
        "number": number,
        "title": "bench issue",
        "body": "",
        "state": "open",
        "labels": [],
        "user": {"login": "Codertocat", "id": 21031067, "type": "User"},
    }


ROUTES = [
    (r"^/app$", lambda m: (200, {"id": 1, "slug": "closer-bench", "name": "closer-bench"})),
    (r"/collaborators/[^/]+/permission$", lambda m: (200, {"permission": "admin", "role_name": "admin"})),
    (r"/contents/", lambda m: (404, {"message": "Not Found"})),
    (r"/issues/\d+/comments$", lambda m: (200, [])),
    (r"/labels$", lambda m: (200, [])),
    (r"/issues/(\d+)$", lambda m: (200, issue(int(m.group(1))))),
    (r"^/repos/([^/]+)/([^/]+)$", lambda m: (200, {
        "full_name": f"{m.group(1)}/{m.group(2)}", "default_branch": "main",
        "clone_url": f"https://github.invalid/{m.group(1)}/{m.group(2)}.git", "private": False})),
]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # The head and the body go out in two writes: with Nagle's algorithm on,
    # the body waits for the client's delayed ACK of the head (40 ms), which
    # GitHub never makes anyone wait.
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        path = self.path.split("?")[0]
        if path == "/_stats":
            return self.answer(200, STATS)
        for pattern, reply in ROUTES:
            m = re.search(pattern, path)
            if m:
                count("GET " + pattern)
                return self.answer(*reply(m))
        count("GET unknown " + path)
        self.answer(404, {"message": "Not Found"})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        path = self.path.split("?")[0]
        if re.search(r"^/app/installations/\d+/access_tokens$", path):
            count("POST access_tokens")
            expires = datetime.now(timezone.utc) + timedelta(hours=1)
            return self.answer(201, {"token": "ghs_bench", "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%SZ")})
        count("POST unknown " + path)
        self.answer(201, {"id": 1})


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # compare.sh ends each closer cell with kill -9, often mid-request;
        # the connection reset that leaves here is expected, not news.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


if __name__ == "__main__":
    server = Server(("127.0.0.1", int(sys.argv[1])), Handler)
    server.serve_forever()
