"""MQTT: the MQTT 3.1.1 listener as nats-server has it (`server/mqtt.go`), and MQTT 5.

- `packets`, `properties`, `codec`, `frames`: the sans-IO codec (bytes -> packets, packets ->
  bytes), MQTT 3.1.1 and 5.0;
- `topics`: MQTT topics <-> NATS subjects; `nats_headers`: the `Nmqtt-*` headers;
- `session`: one MQTT connection, a `server.client.Client` with the MQTT wire;
- `inflight`: QoS 1/2 messages awaiting acknowledgement;
- `part`: the listener and the per-account state, attached by `pynatsd.assembly`.
"""
