#!/usr/bin/env python3
"""An HTTP proxy in front of an S3 server (moto) that counts requests by kind.

Forwards every request to TARGET unchanged (path-style S3: /bucket/key?query) and
counts it under one of:
  LIST      GET of a bucket listing (query has list-type=, or the path is just /bucket)
  GET       other GETs (object reads, ranged or not)
  HEAD
  PUT       unconditional PUT (objects, multipart parts)
  PUT_COND  PUT with If-None-Match or If-Match (conditional create / update)
  COPY      PUT with x-amz-copy-source
  DELETE
  POST      (multipart create/complete, batch delete)
Clients keep their connections open (HTTP/1.1 keep-alive), as with a real store;
each forwarded request uses a new connection to TARGET.

Control paths (never forwarded; no S3 bucket name can start with '_'):
  GET  /__bench__/counts   {"LIST": n, ..., "total": n, "requests": [[kind, method, path, status], ...]}
  POST /__bench__/reset    zero the counts
Prints the port it listens on, then serves until killed. Standard library only.

Usage: counting_proxy.py --target http://127.0.0.1:PORT [--port 0]
"""
import argparse
import http.client
import http.server
import json
import socketserver
import sys
import threading
import urllib.parse

KINDS = ["LIST", "GET", "HEAD", "PUT", "PUT_COND", "COPY", "DELETE", "POST", "OTHER"]
HOP_BY_HOP = {"connection", "proxy-connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade"}

target = None
lock = threading.Lock()
counts = {k: 0 for k in KINDS}
requests = []  # [kind, method, path, status]


def classify(method, path, headers):
    parsed = urllib.parse.urlsplit(path)
    query = urllib.parse.parse_qs(parsed.query, keep_blank_values=True)
    if method == "GET":
        # Path-style: /bucket or /bucket/ is the bucket itself, i.e. a listing.
        if "list-type" in query or "/" not in parsed.path.strip("/"):
            return "LIST"
        return "GET"
    if method == "PUT":
        if headers.get("x-amz-copy-source"):
            return "COPY"
        if headers.get("If-None-Match") or headers.get("If-Match"):
            return "PUT_COND"
        return "PUT"
    if method in ("HEAD", "DELETE", "POST"):
        return method
    return "OTHER"


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive towards the client

    def log_message(self, *a):
        pass

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline().strip():  # trailers
                        pass
                    return bytes(body)
                body += self.rfile.read(size)
                self.rfile.readline()  # CRLF after each chunk
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def reply(self, status, payload, content_type="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def control(self):
        if self.path == "/__bench__/counts":
            with lock:
                out = dict(counts)
                out["total"] = sum(counts.values())
                out["requests"] = list(requests)
            self.reply(200, json.dumps(out).encode())
        elif self.path == "/__bench__/reset":
            with lock:
                for k in KINDS:
                    counts[k] = 0
                requests.clear()
            self.reply(200, b"{}")
        else:
            self.reply(404, b'{"error": "unknown control path"}')

    def forward(self):
        body = self.read_body()
        if self.path.startswith("/__bench__/"):
            return self.control()
        kind = classify(self.command, self.path, self.headers)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        if body or self.command in ("PUT", "POST"):
            headers["Content-Length"] = str(len(body))
        conn = http.client.HTTPConnection(target.hostname, target.port, timeout=120)
        try:
            conn.request(self.command, self.path, body=body, headers=headers)
            response = conn.getresponse()
            data = response.read()
        except OSError as e:
            with lock:
                counts[kind] += 1
                requests.append([kind, self.command, self.path, f"error: {e}"])
            self.close_connection = True
            return self.reply(502, b"<Error><Code>BadGateway</Code></Error>", "application/xml")
        finally:
            conn.close()
        with lock:
            counts[kind] += 1
            requests.append([kind, self.command, self.path, response.status])
        self.send_response(response.status)
        for k, v in response.getheaders():
            if k.lower() not in HOP_BY_HOP and k.lower() != "content-length":
                self.send_header(k, v)
        if self.command == "HEAD":
            self.send_header("Content-Length", response.getheader("Content-Length", "0"))
            self.end_headers()
            return
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = forward


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    global target
    p = argparse.ArgumentParser()
    p.add_argument("--target", required=True)
    p.add_argument("--port", type=int, default=0)
    args = p.parse_args()
    target = urllib.parse.urlparse(args.target)
    server = Server(("127.0.0.1", args.port), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
