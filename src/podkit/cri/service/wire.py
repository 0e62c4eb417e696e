"""Replies sent as bytes: a List is its items' serialized entries joined, so an unchanged item
costs a lookup, not a copy into a new message and a serialization per call.

Protobuf parses concatenated encodings of a message as one message with the repeated fields
appended in order, so ``b"".join`` of one-item responses is the whole response. The gRPC
registration here lets a handler return such bytes (or a message, as every handler may).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["WIRE_METHODS", "bytes_twin", "one_item", "register", "sends_bytes"]

WIRE_METHODS: Mapping[str, str] = {
    "ListContainers": "list_containers_wire",
    "ListPodSandbox": "list_pod_sandbox_wire",
    "ContainerStatus": "container_status_wire",
}
"""The RPCs whose service method has a twin returning the serialized response."""


def _defined_by(cls: type, attr: str) -> type | None:
    return next((k for k in cls.__mro__ if attr in vars(k)), None)


def bytes_twin(service: object, name: str) -> Callable[[Any], bytes] | None:
    """The bytes twin of RPC ``name`` (:data:`WIRE_METHODS`) when it answers for the method
    ``service`` really has: both defined by the same class, neither set on the instance.
    ``None`` otherwise: a subclass that overrides ``ListContainers`` gets its override called,
    never podkit's kept bytes."""
    twin = WIRE_METHODS.get(name)
    own = getattr(service, "__dict__", {})
    if twin is None or name in own or twin in own:
        return None
    owner = _defined_by(type(service), twin)
    if owner is None or _defined_by(type(service), name) is not owner:
        return None
    method: Callable[[Any], bytes] = getattr(service, twin)
    return method


def one_item(response: Callable[[], Any], field: str) -> Callable[[Any], bytes]:
    """An encoder of one item as the serialized ``response`` holding only it in ``field``
    (a repeated or a singular message field)."""
    def encode(item: Any) -> bytes:
        out = response()
        target = getattr(out, field)
        if hasattr(target, "add"):
            target.append(item)
        else:
            target.CopyFrom(item)
        data: bytes = out.SerializeToString()
        return data
    return encode


def sends_bytes(serialize: Callable[[Any], bytes]) -> Callable[[Any], bytes]:
    """A response serializer that passes bytes through and serializes messages."""
    def serializer(response: Any) -> bytes:
        if type(response) is bytes:
            return response
        return serialize(response)
    return serializer


class _Collect:
    """Stands in for a grpc server to catch what a generated ``add_*_to_server`` registers."""

    def __init__(self) -> None:
        self.services: list[tuple[str, dict[str, Any]]] = []

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        pass  # made again from the method handlers below

    def add_registered_method_handlers(self, service: str, handlers: dict[str, Any]) -> None:
        self.services.append((service, handlers))


def register(add: Callable[[Any, Any], None], servicer: Any, server: Any) -> None:
    """``add(servicer, server)`` (a generated ``add_*Servicer_to_server``) with every
    method's response serializer passing bytes through (:func:`sends_bytes`)."""
    import grpc

    caught = _Collect()
    add(servicer, caught)
    for service, handlers in caught.services:
        passing = {name: h._replace(response_serializer=sends_bytes(h.response_serializer))
                   for name, h in handlers.items()}
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, passing),))
        server.add_registered_method_handlers(service, passing)
