"""The stack's S3 endpoint: moto's server answering only requests signed with the stack's key.

moto's server takes any request, signed or not, by default. Here every request is authenticated, as AWS
does (``INITIAL_NO_AUTH_ACTION_COUNT=0``, set before moto loads): one IAM user holds the stack's access
key (``DEEPSENT_S3_KEY_ID`` / ``DEEPSENT_S3_SECRET`` in this process's environment, from a 0600 file of the
stack, ``StackConfig.s3_keys``) and a policy allowing everything; an unsigned request or one signed with
another key gets 403 (one without a signature is refused before moto sees it). moto's admin API (``/moto-api/...``: reset the data, turn authentication off, dump
every object) is refused too; only ``GET /moto-api/``, the health check, answers.

Run as ``python -m infra.s3_server --host 127.0.0.1 --port 9000``.
"""
from __future__ import annotations

import argparse
import json
import os
from typing import Any, Callable, Iterable

KEY_ID_ENV, SECRET_ENV = "DEEPSENT_S3_KEY_ID", "DEEPSENT_S3_SECRET"
USER = "deepsent-stack"
ALLOW_ALL = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]})
HEALTH_PATHS = ("/moto-api", "/moto-api/")

Wsgi = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def add_stack_user(key_id: str, secret: str) -> None:
    """The IAM user of the stack's key (moto's default account), allowed every action."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.iam.models import iam_backends

    backend = iam_backends[DEFAULT_ACCOUNT_ID]["aws"]
    backend.create_user(region_name="us-east-1", user_name=USER)
    backend.put_user_policy(USER, "allow-all", ALLOW_ALL)
    key = backend.create_access_key(USER)
    del backend.access_keys[key.physical_resource_id]
    key.access_key_id, key.secret_access_key = key_id, secret  # moto draws random keys; the stack's are its own
    backend.access_keys[key_id] = key


def _refused(start_response: Callable[..., Any], message: str) -> Iterable[bytes]:
    """A 403 with an S3-style ``AccessDenied`` error body."""
    start_response("403 Forbidden", [("Content-Type", "application/xml")])
    return [f"<Error><Code>AccessDenied</Code><Message>{message}</Message></Error>".encode()]


def signed_only(app: Wsgi) -> Wsgi:
    """``app`` refusing (403) moto's admin API, except the health check ``GET /moto-api/``, and any other request
    without a signature (moto would fail on it with a 500); moto checks the signatures themselves."""

    def guarded(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path.startswith("/moto-api"):
            if path in HEALTH_PATHS and environ.get("REQUEST_METHOD") in ("GET", "HEAD"):
                return app(environ, start_response)
            return _refused(start_response, "the stack's S3 endpoint has no admin API")
        if "HTTP_AUTHORIZATION" not in environ:
            return _refused(start_response, "unsigned request: sign it with the stack's key (client.env)")
        return app(environ, start_response)

    return guarded


def main(argv: list[str] | None = None) -> None:
    """Serve S3 on ``--host``/``--port``, every request authenticated with the stack's key."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    key_id, secret = os.environ.pop(KEY_ID_ENV), os.environ.pop(SECRET_ENV)
    os.environ["INITIAL_NO_AUTH_ACTION_COUNT"] = "0"  # read when moto loads: authenticate from the first request
    from werkzeug.serving import run_simple

    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app

    add_stack_user(key_id, secret)
    app = signed_only(DomainDispatcherApplication(create_backend_app))
    run_simple(args.host, args.port, app, threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main()
