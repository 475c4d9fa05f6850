#!/usr/bin/env python3
"""Create a blob container on Azurite (the Azure Storage emulator).

Usage: scripts/azurite_create_container.py ENDPOINT CONTAINER

ENDPOINT is the emulator's blob endpoint, with or without the account path:
http://127.0.0.1:10000 or http://127.0.0.1:10000/devstoreaccount1.
Signs `PUT {endpoint}/devstoreaccount1/{container}?restype=container` with
SharedKey for the well-known emulator account. Exits 0 when the container was
created (201) or already exists (409); otherwise prints the response and exits 1.
Standard library only.
"""

import base64
import hashlib
import hmac
import sys
import urllib.error
import urllib.parse
import urllib.request
from email.utils import formatdate

ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
API_VERSION = "2021-08-06"


def signed_request(method, url, query):
    """Builds a SharedKey-signed request with an empty body."""
    path = urllib.parse.urlsplit(url).path
    headers = {
        "x-ms-date": formatdate(usegmt=True),
        "x-ms-version": API_VERSION,
    }
    canonical_headers = "".join(f"{k}:{headers[k]}\n" for k in sorted(headers))
    canonical_resource = f"/{ACCOUNT}{path}" + "".join(
        f"\n{k.lower()}:{query[k]}" for k in sorted(query, key=str.lower)
    )
    # VERB, Content-Encoding, Content-Language, Content-Length (empty when 0),
    # Content-MD5, Content-Type, Date, If-Modified-Since, If-Match,
    # If-None-Match, If-Unmodified-Since, Range, then headers and resource.
    string_to_sign = method + "\n" * 12 + canonical_headers + canonical_resource
    digest = hmac.new(
        base64.b64decode(KEY), string_to_sign.encode("utf-8"), hashlib.sha256
    ).digest()
    headers["Authorization"] = f"SharedKey {ACCOUNT}:{base64.b64encode(digest).decode()}"
    headers["Content-Length"] = "0"
    full_url = url + "?" + urllib.parse.urlencode(query)
    # No body: with data=b"" urllib would add an unsigned Content-Type header.
    return urllib.request.Request(full_url, headers=headers, method=method)


def main(argv):
    if len(argv) != 3:
        print(f"usage: {argv[0]} ENDPOINT CONTAINER", file=sys.stderr)
        return 2
    endpoint, container = argv[1].rstrip("/"), argv[2]
    if urllib.parse.urlsplit(endpoint).path in ("", "/"):
        endpoint += "/" + ACCOUNT
    url = f"{endpoint}/{container}"
    request = signed_request("PUT", url, {"restype": "container"})
    # Loopback server: never go through an HTTP proxy from the environment.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=30) as response:
            status, body = response.status, response.read()
    except urllib.error.HTTPError as err:
        status, body = err.code, err.read()
    except OSError as err:
        print(f"azurite_create_container: PUT {url}: {err}", file=sys.stderr)
        return 1
    if status in (201, 409):
        return 0
    print(
        f"azurite_create_container: PUT {url}?restype=container answered {status}:\n"
        + body.decode("utf-8", "replace"),
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
