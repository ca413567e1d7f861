"""The NATS client protocol, sans-IO: bytes in, operations out (parser); operations in, bytes out
(frames). Nothing here touches a socket."""
