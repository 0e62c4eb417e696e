"""CRI v1 (``runtime.v1``) for podkit: the wire types and conversions to podkit models.

``podkit.cri.api_pb2`` holds the generated protobuf messages (from podkit's own ``api.proto``,
wire-identical to cri-api v0.36.3). Importing this package never imports grpc; the gRPC stubs in
``api_pb2_grpc`` need the ``grpc`` extra.
"""
