"""The wire layer: generated protobuf/gRPC code and conversions. Protobuf types stay here."""
