"""The RSS floor of a CRI server in Python: a bare grpcio server that answers the CRI's
Version and nothing else (``python grpc_floor.py SOCKET``): the interpreter, grpcio, protobuf
and the ``runtime.v1`` descriptors (``podkit/cri/api_pb2.py`` loaded by its path, without
the rest of podkit), the same thread pool bound as ``podkit cri serve``."""

from __future__ import annotations

import importlib.util
import signal
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

API_PB2 = Path(__file__).resolve().parents[2] / "src" / "podkit" / "cri" / "api_pb2.py"


def _api_pb2() -> Any:
    spec = importlib.util.spec_from_file_location("api_pb2", API_PB2)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(socket_path: str) -> int:
    import grpc

    pb = _api_pb2()

    def version(request: Any, context: Any) -> Any:
        return pb.VersionResponse(version="0.1.0", runtime_name="floor", runtime_version="0",
                                  runtime_api_version="v1")

    handler = grpc.method_handlers_generic_handler("runtime.v1.RuntimeService", {
        "Version": grpc.unary_unary_rpc_method_handler(
            version, request_deserializer=pb.VersionRequest.FromString,
            response_serializer=pb.VersionResponse.SerializeToString)})
    server = grpc.server(ThreadPoolExecutor(max_workers=64), handlers=[handler])
    server.add_insecure_port(f"unix://{socket_path}")
    server.start()
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    done.wait()
    server.stop(0).wait()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
