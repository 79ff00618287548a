"""The V2 gRPC definition (``grpc_predict_v2.proto``); see the file's header for why modules are not generated here."""
