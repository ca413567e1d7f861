"""JetStream API errors: `{"code": HTTP-like, "err_code": JetStream code, "description": ...}`.

Codes and texts as nats-server's `server/errors.json` spells them.
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    def __init__(self, code: int, err_code: int, description: str) -> None:
        super().__init__(description)
        self.code = code
        self.err_code = err_code
        self.description = description

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "err_code": self.err_code, "description": self.description}


def bad_request() -> ApiError:
    return ApiError(400, 10003, "bad request")


def invalid_json(detail: str) -> ApiError:
    return ApiError(400, 10025, f"invalid JSON: {detail}")


def not_enabled() -> ApiError:
    return ApiError(503, 10076, "JetStream not enabled")


def not_enabled_for_account() -> ApiError:
    return ApiError(503, 10039, "JetStream not enabled for account")


def stream_not_found() -> ApiError:
    return ApiError(404, 10059, "stream not found")


def stream_mismatch() -> ApiError:
    return ApiError(400, 10056, "stream name in subject does not match request")


def stream_name_exist() -> ApiError:
    return ApiError(400, 10058, "stream name already in use with a different configuration")


def stream_subject_overlap() -> ApiError:
    return ApiError(400, 10065, "subjects overlap with an existing stream")


def stream_invalid_config(detail: str) -> ApiError:
    return ApiError(500, 10052, detail)


def stream_name_path_separators() -> ApiError:
    return ApiError(400, 10128, "Stream name can not contain path separators")


def replicas_not_supported() -> ApiError:
    return ApiError(500, 10074, "replicas > 1 not supported in non-clustered mode")


def no_message_found() -> ApiError:
    return ApiError(404, 10037, "no message found")


def sequence_not_found(seq: int) -> ApiError:
    return ApiError(400, 10043, f"sequence {seq} not found")


def stream_msg_delete_failed(detail: str) -> ApiError:
    return ApiError(500, 10057, detail)


def stream_sealed() -> ApiError:
    return ApiError(400, 10109, "invalid operation on sealed stream")


def stream_purge_failed(detail: str) -> ApiError:
    return ApiError(500, 10110, detail)


def stream_store_failed(detail: str) -> ApiError:
    return ApiError(503, 10077, detail)


def message_size_exceeds() -> ApiError:
    return ApiError(400, 10054, "message size exceeds maximum allowed")


def stream_not_match() -> ApiError:
    return ApiError(400, 10060, "expected stream does not match")


def wrong_last_sequence(seq: int) -> ApiError:
    return ApiError(400, 10071, f"wrong last sequence: {seq}")


def wrong_last_msg_id(msg_id: str) -> ApiError:
    return ApiError(400, 10070, f"wrong last msg ID: {msg_id}")


def rollup_failed(detail: str) -> ApiError:
    return ApiError(500, 10111, detail)


def insufficient_resources() -> ApiError:
    return ApiError(503, 10023, "insufficient resources")


def consumer_not_found() -> ApiError:
    return ApiError(404, 10014, "consumer not found")


def consumer_name_exist() -> ApiError:
    return ApiError(400, 10013, "consumer name already in use")


def consumer_already_exists() -> ApiError:
    return ApiError(400, 10148, "consumer already exists")


def consumer_does_not_exist() -> ApiError:
    return ApiError(400, 10149, "consumer does not exist")


def consumer_create(detail: str) -> ApiError:
    return ApiError(500, 10012, detail)


def consumer_config_required() -> ApiError:
    return ApiError(400, 10078, "consumer config required")


def consumer_filter_mismatch() -> ApiError:
    return ApiError(
        400, 10131, "Consumer create request did not match filtered subject from create subject"
    )


def consumer_durable_name_mismatch() -> ApiError:
    return ApiError(400, 10132, "Consumer Durable and Name have to be equal if both are provided")


def consumer_name_path_separators() -> ApiError:
    return ApiError(400, 10127, "Consumer name can not contain path separators")


def consumer_duplicate_filters() -> ApiError:
    return ApiError(
        400, 10136, "consumer cannot have both FilterSubject and FilterSubjects specified"
    )


def consumer_wq_requires_explicit_ack() -> ApiError:
    return ApiError(400, 10098, "workqueue stream requires explicit ack")


def consumer_wq_not_unique() -> ApiError:
    return ApiError(400, 10100, "filtered consumer not unique on workqueue stream")


def consumer_wq_multiple_unfiltered() -> ApiError:
    return ApiError(400, 10099, "multiple non-filtered consumers not allowed on workqueue stream")


def consumer_push_max_waiting() -> ApiError:
    return ApiError(400, 10080, "consumer in push mode can not set max waiting")


def consumer_max_waiting_negative() -> ApiError:
    return ApiError(400, 10087, "consumer max waiting needs to be positive")


def consumer_invalid_policy(detail: str) -> ApiError:
    return ApiError(400, 10094, detail)
