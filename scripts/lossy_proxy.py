#!/usr/bin/env python3
"""An HTTP proxy that loses the responses of commit writes.

Forwards every request to TARGET. Requests that commit a version -- a PUT with
`If-None-Match: *` (S3 conditional create) or a DynamoDB `PutItem` -- are forwarded
and allowed to succeed, then, for every EVERY-th of them, the client gets a 503 (or,
with --mode close, the connection is closed without a response): the write landed, but
the caller cannot know. With --mode reset the connection is reset (TCP RST), which
object_store does not retry for a PUT. Prints the port it listens on, then serves
until killed.

With --mode outage, no response is lost; instead `GET /__outage/on` makes every
request about versions (a path or listing prefix holding `_versions`) answer 503
without reaching the store, until `GET /__outage/off`: a store that stays unreachable
for commits while data files still write, so that a commit's outcome is unknown.

Usage: lossy_proxy.py --target http://127.0.0.1:PORT [--every 2] [--mode 503|close|reset|outage]
"""
import argparse
import http.client
import http.server
import socket
import socketserver
import struct
import sys
import threading
import urllib.parse

args = None
counter = 0
lock = threading.Lock()
lost = 0
outage = False


def is_commit(method, headers):
    if method == "PUT" and headers.get("If-None-Match", "").strip() == "*":
        return True
    return method == "POST" and headers.get("X-Amz-Target", "").endswith(".PutItem")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def reply(self, status, payload):
        self.send_response(status)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Content-Type", "application/xml")
        self.end_headers()
        self.wfile.write(payload)

    def forward(self):
        global counter, lost, outage
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if self.path in ("/__outage/on", "/__outage/off"):
            outage = self.path.endswith("/on")
            return self.reply(200, b"ok")
        if outage and "_versions" in urllib.parse.unquote(self.path):
            return self.reply(503, b"<Error><Code>ServiceUnavailable</Code><Message>injected: outage</Message></Error>")
        target = urllib.parse.urlparse(args.target)
        conn = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("connection", "proxy-connection")}
        conn.request(self.command, self.path, body=body, headers=headers)
        response = conn.getresponse()
        data = response.read()
        conn.close()
        lose = False
        if is_commit(self.command, self.headers) and 200 <= response.status < 300:
            with lock:
                counter += 1
                lose = counter % args.every == 0
                if lose:
                    lost += 1
        lose = lose and args.mode != "outage"
        if lose and args.mode == "close":
            self.close_connection = True
            self.connection.shutdown(2)
            return
        if lose and args.mode == "reset":
            self.close_connection = True
            # Linger 0: close sends a TCP RST instead of a FIN.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            return
        if lose:
            return self.reply(503, b"<Error><Code>ServiceUnavailable</Code><Message>injected: response lost</Message></Error>")
        self.send_response(response.status)
        for k, v in response.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length"):
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
    global args
    p = argparse.ArgumentParser()
    p.add_argument("--target", required=True)
    p.add_argument("--every", type=int, default=2)
    p.add_argument("--mode", choices=["503", "close", "reset", "outage"], default="503")
    p.add_argument("--port", type=int, default=0)
    args = p.parse_args()
    server = Server(("127.0.0.1", args.port), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
