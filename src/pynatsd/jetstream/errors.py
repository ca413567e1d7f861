"""JetStream API errors: `{"code": HTTP-like, "err_code": JetStream code, "description": ...}`.

Codes and texts as nats-server's `server/errors.json` spells them.
"""

from __future__ import annotations

from typing import Any

# nats-server's `server/errors.json`, every entry: name (Go constant without the `JS` prefix and
# the `Err`/`ErrF`/`F` suffix) -> (code, err_code, description). `{placeholders}` are filled by
# `js_error(name, placeholder=value)`, as Go's `NewJS...Error(...)` constructors do.
ERRORS: dict[str, tuple[int, int, str]] = {
    "AccountResourcesExceeded": (400, 10002, "resource limits exceeded for account"),
    "BadRequest": (400, 10003, "bad request"),
    "ClusterIncomplete": (503, 10004, "incomplete results"),
    "ClusterNoPeers": (400, 10005, "{err}"),
    "ClusterNotActive": (500, 10006, "JetStream not in clustered mode"),
    "ClusterNotAssigned": (500, 10007, "JetStream cluster not assigned to this server"),
    "ClusterNotAvail": (503, 10008, "JetStream system temporarily unavailable"),
    "ClusterNotLeader": (500, 10009, "JetStream cluster can not handle request"),
    "ClusterRequired": (503, 10010, "JetStream clustering support required"),
    "ClusterTags": (400, 10011, "tags placement not supported for operation"),
    "ConsumerCreate": (500, 10012, "{err}"),
    "ConsumerNameExist": (400, 10013, "consumer name already in use"),
    "ConsumerNotFound": (404, 10014, "consumer not found"),
    "SnapshotDeliverSubjectInvalid": (400, 10015, "deliver subject not valid"),
    "ConsumerDurableNameNotInSubject": (
        400,
        10016,
        "consumer expected to be durable but no durable name set in subject",
    ),
    "ConsumerDurableNameNotMatchSubject": (
        400,
        10017,
        "consumer name in subject does not match durable name in request",
    ),
    "ConsumerDurableNameNotSet": (
        400,
        10018,
        "consumer expected to be durable but a durable name was not set",
    ),
    "ConsumerEphemeralWithDurableInSubject": (
        400,
        10019,
        "consumer expected to be ephemeral but detected a durable name set in subject",
    ),
    "ConsumerEphemeralWithDurableName": (
        400,
        10020,
        "consumer expected to be ephemeral but a durable name was set in request",
    ),
    "StreamExternalApiOverlap": (
        400,
        10021,
        "stream external api prefix {prefix} must not overlap with {subject}",
    ),
    "StreamExternalDelPrefixOverlaps": (
        400,
        10022,
        "stream external delivery prefix {prefix} overlaps with stream subject {subject}",
    ),
    "InsufficientResources": (503, 10023, "insufficient resources"),
    "StreamInvalidExternalDeliverySubj": (
        400,
        10024,
        "stream external delivery prefix {prefix} must not contain wildcards",
    ),
    "InvalidJSON": (400, 10025, "invalid JSON: {err}"),
    "MaximumConsumersLimit": (400, 10026, "maximum consumers limit reached"),
    "MaximumStreamsLimit": (400, 10027, "maximum number of streams reached"),
    "MemoryResourcesExceeded": (500, 10028, "insufficient memory resources available"),
    "MirrorConsumerSetupFailed": (500, 10029, "{err}"),
    "MirrorMaxMessageSizeTooBig": (
        400,
        10030,
        "stream mirror must have max message size >= source",
    ),
    "MirrorWithSources": (400, 10031, "stream mirrors can not also contain other sources"),
    "MirrorWithStartSeqAndTime": (
        400,
        10032,
        "stream mirrors can not have both start seq and start time configured",
    ),
    "MirrorWithSubjectFilters": (400, 10033, "stream mirrors can not contain filtered subjects"),
    "MirrorWithSubjects": (400, 10034, "stream mirrors can not contain subjects"),
    "NoAccount": (503, 10035, "account not found"),
    "ClusterUnSupportFeature": (503, 10036, "not currently supported in clustered mode"),
    "NoMessageFound": (404, 10037, "no message found"),
    "NotEmptyRequest": (400, 10038, "expected an empty request payload"),
    "NotEnabledForAccount": (503, 10039, "JetStream not enabled for account"),
    "ClusterPeerNotMember": (400, 10040, "peer not a member"),
    "RaftGeneral": (500, 10041, "{err}"),
    "RestoreSubscribeFailed": (
        500,
        10042,
        "JetStream unable to subscribe to restore snapshot {subject}: {err}",
    ),
    "SequenceNotFound": (400, 10043, "sequence {seq} not found"),
    "ClusterServerNotMember": (400, 10044, "server is not a member of the cluster"),
    "SourceConsumerSetupFailed": (500, 10045, "{err}"),
    "SourceMaxMessageSizeTooBig": (
        400,
        10046,
        "stream source must have max message size >= target",
    ),
    "StorageResourcesExceeded": (500, 10047, "insufficient storage resources available"),
    "StreamAssignment": (500, 10048, "{err}"),
    "StreamCreate": (500, 10049, "{err}"),
    "StreamDelete": (500, 10050, "{err}"),
    "StreamGeneralError": (500, 10051, "{err}"),
    "StreamInvalidConfig": (500, 10052, "{err}"),
    "StreamLimits": (500, 10053, "{err}"),
    "StreamMessageExceedsMaximum": (400, 10054, "message size exceeds maximum allowed"),
    "StreamMirrorNotUpdatable": (400, 10055, "stream mirror configuration can not be updated"),
    "StreamMismatch": (400, 10056, "stream name in subject does not match request"),
    "StreamMsgDeleteFailed": (500, 10057, "{err}"),
    "StreamNameExist": (400, 10058, "stream name already in use with a different configuration"),
    "StreamNotFound": (404, 10059, "stream not found"),
    "StreamNotMatch": (400, 10060, "expected stream does not match"),
    "StreamReplicasNotUpdatable": (400, 10061, "Replicas configuration can not be updated"),
    "StreamRestore": (500, 10062, "restore failed: {err}"),
    "StreamSequenceNotMatch": (503, 10063, "expected stream sequence does not match"),
    "StreamSnapshot": (500, 10064, "snapshot failed: {err}"),
    "StreamSubjectOverlap": (400, 10065, "subjects overlap with an existing stream"),
    "StreamTemplateCreate": (500, 10066, "{err}"),
    "StreamTemplateDelete": (500, 10067, "{err}"),
    "StreamTemplateNotFound": (404, 10068, "template not found"),
    "StreamUpdate": (500, 10069, "{err}"),
    "StreamWrongLastMsgID": (400, 10070, "wrong last msg ID: {id}"),
    "StreamWrongLastSequence": (400, 10071, "wrong last sequence: {seq}"),
    "TempStorageFailed": (500, 10072, "JetStream unable to open temp storage for restore"),
    "TemplateNameNotMatchSubject": (400, 10073, "template name in subject does not match request"),
    "StreamReplicasNotSupported": (500, 10074, "replicas > 1 not supported in non-clustered mode"),
    "PeerRemap": (503, 10075, "peer remap failed"),
    "NotEnabled": (503, 10076, "JetStream not enabled"),
    "StreamStoreFailed": (503, 10077, "{err}"),
    "ConsumerConfigRequired": (400, 10078, "consumer config required"),
    "ConsumerDeliverToWildcards": (400, 10079, "consumer deliver subject has wildcards"),
    "ConsumerPushMaxWaiting": (400, 10080, "consumer in push mode can not set max waiting"),
    "ConsumerDeliverCycle": (400, 10081, "consumer deliver subject forms a cycle"),
    "ConsumerMaxPendingAckPolicyRequired": (
        400,
        10082,
        "consumer requires ack policy for max ack pending",
    ),
    "ConsumerSmallHeartbeat": (400, 10083, "consumer idle heartbeat needs to be >= 100ms"),
    "ConsumerPullRequiresAck": (
        400,
        10084,
        "consumer in pull mode requires explicit ack policy on workqueue stream",
    ),
    "ConsumerPullNotDurable": (400, 10085, "consumer in pull mode requires a durable name"),
    "ConsumerPullWithRateLimit": (400, 10086, "consumer in pull mode can not have rate limit set"),
    "ConsumerMaxWaitingNegative": (400, 10087, "consumer max waiting needs to be positive"),
    "ConsumerHBRequiresPush": (
        400,
        10088,
        "consumer idle heartbeat requires a push based consumer",
    ),
    "ConsumerFCRequiresPush": (400, 10089, "consumer flow control requires a push based consumer"),
    "ConsumerDirectRequiresPush": (400, 10090, "consumer direct requires a push based consumer"),
    "ConsumerDirectRequiresEphemeral": (
        400,
        10091,
        "consumer direct requires an ephemeral consumer",
    ),
    "ConsumerOnMapped": (400, 10092, "consumer direct on a mapped consumer"),
    "ConsumerFilterNotSubset": (
        400,
        10093,
        "consumer filter subject is not a valid subset of the interest subjects",
    ),
    "ConsumerInvalidPolicy": (400, 10094, "{err}"),
    "ConsumerInvalidSampling": (
        400,
        10095,
        "failed to parse consumer sampling configuration: {err}",
    ),
    "StreamInvalid": (500, 10096, "stream not valid"),
    "StreamHeaderExceedsMaximum": (400, 10097, "header size exceeds maximum allowed of 64k"),
    "ConsumerWQRequiresExplicitAck": (400, 10098, "workqueue stream requires explicit ack"),
    "ConsumerWQMultipleUnfiltered": (
        400,
        10099,
        "multiple non-filtered consumers not allowed on workqueue stream",
    ),
    "ConsumerWQConsumerNotUnique": (400, 10100, "filtered consumer not unique on workqueue stream"),
    "ConsumerWQConsumerNotDeliverAll": (
        400,
        10101,
        "consumer must be deliver all on workqueue stream",
    ),
    "ConsumerNameTooLong": (400, 10102, "consumer name is too long, maximum allowed is {max}"),
    "ConsumerBadDurableName": (400, 10103, "durable name can not contain '.', '*', '>'"),
    "ConsumerStoreFailed": (500, 10104, "error creating store for consumer: {err}"),
    "ConsumerExistingActive": (400, 10105, "consumer already exists and is still active"),
    "ConsumerReplacementWithDifferentName": (
        400,
        10106,
        "consumer replacement durable config not the same",
    ),
    "ConsumerDescriptionTooLong": (
        400,
        10107,
        "consumer description is too long, maximum allowed is {max}",
    ),
    "ConsumerWithFlowControlNeedsHeartbeats": (
        400,
        10108,
        "consumer with flow control also needs heartbeats",
    ),
    "StreamSealed": (400, 10109, "invalid operation on sealed stream"),
    "StreamPurgeFailed": (500, 10110, "{err}"),
    "StreamRollupFailed": (500, 10111, "{err}"),
    "ConsumerInvalidDeliverSubject": (400, 10112, "invalid push consumer deliver subject"),
    "StreamMaxBytesRequired": (
        400,
        10113,
        "account requires a stream config to have max bytes set",
    ),
    "ConsumerMaxRequestBatchNegative": (400, 10114, "consumer max request batch needs to be > 0"),
    "ConsumerMaxRequestExpiresTooSmall": (
        400,
        10115,
        "consumer max request expires needs to be >= 1ms",
    ),
    "ConsumerMaxDeliverBackoff": (
        400,
        10116,
        "max deliver is required to be > length of backoff values",
    ),
    "StreamInfoMaxSubjects": (500, 10117, "subject details would exceed maximum allowed"),
    "StreamOffline": (500, 10118, "stream is offline"),
    "ConsumerOffline": (500, 10119, "consumer is offline"),
    "NoLimits": (400, 10120, "no JetStream default or applicable tiered limit present"),
    "ConsumerMaxPendingAckExcess": (
        400,
        10121,
        "consumer max ack pending exceeds system limit of {limit}",
    ),
    "StreamMaxStreamBytesExceeded": (
        400,
        10122,
        "stream max bytes exceeds account limit max stream bytes",
    ),
    "StreamMoveAndScale": (400, 10123, "can not move and scale a stream in a single update"),
    "StreamMoveInProgress": (400, 10124, "stream move already in progress"),
    "ConsumerMaxRequestBatchExceeded": (
        400,
        10125,
        "consumer max request batch exceeds server limit of {limit}",
    ),
    "ConsumerReplicasExceedsStream": (
        400,
        10126,
        "consumer config replica count exceeds parent stream",
    ),
    "ConsumerNameContainsPathSeparators": (
        400,
        10127,
        "Consumer name can not contain path separators",
    ),
    "StreamNameContainsPathSeparators": (400, 10128, "Stream name can not contain path separators"),
    "StreamReconfigureNotInProgress": (400, 10129, "stream reconfiguration not in progress"),
    "StreamNameExistRestoreFailed": (400, 10130, "stream name already in use, cannot restore"),
    "ConsumerCreateFilterSubjectMismatch": (
        400,
        10131,
        "Consumer create request did not match filtered subject from create subject",
    ),
    "ConsumerCreateDurableAndNameMismatch": (
        400,
        10132,
        "Consumer Durable and Name have to be equal if both are provided",
    ),
    "ReplicasCountCannotBeNegative": (400, 10133, "replicas count cannot be negative"),
    "ConsumerReplicasShouldMatchStream": (
        400,
        10134,
        "consumer config replicas must match interest retention stream's replicas",
    ),
    "ConsumerMetadataLength": (400, 10135, "consumer metadata exceeds maximum size of {limit}"),
    "ConsumerDuplicateFilterSubjects": (
        400,
        10136,
        "consumer cannot have both FilterSubject and FilterSubjects specified",
    ),
    "ConsumerMultipleFiltersNotAllowed": (
        400,
        10137,
        "consumer with multiple subject filters cannot use subject based API",
    ),
    "ConsumerOverlappingSubjectFilters": (400, 10138, "consumer subject filters cannot overlap"),
    "ConsumerEmptyFilter": (400, 10139, "consumer filter in FilterSubjects cannot be empty"),
    "SourceDuplicateDetected": (400, 10140, "duplicate source configuration detected"),
    "SourceInvalidStreamName": (400, 10141, "sourced stream name is invalid"),
    "MirrorInvalidStreamName": (400, 10142, "mirrored stream name is invalid"),
    "MirrorWithFirstSeq": (400, 10143, "stream mirrors can not have first sequence configured"),
    "SourceMultipleFiltersNotAllowed": (
        400,
        10144,
        "source with multiple subject transforms cannot also have a single subject filter",
    ),
    "SourceInvalidSubjectFilter": (400, 10145, "source transform source: {err}"),
    "SourceInvalidTransformDestination": (400, 10146, "source transform: {err}"),
    "SourceOverlappingSubjectFilters": (400, 10147, "source filters can not overlap"),
    "ConsumerAlreadyExists": (400, 10148, "consumer already exists"),
    "ConsumerDoesNotExist": (400, 10149, "consumer does not exist"),
    "MirrorMultipleFiltersNotAllowed": (
        400,
        10150,
        "mirror with multiple subject transforms cannot also have a single subject filter",
    ),
    "MirrorInvalidSubjectFilter": (400, 10151, "mirror transform source: {err}"),
    "MirrorOverlappingSubjectFilters": (400, 10152, "mirror subject filters can not overlap"),
    "ConsumerInactiveThresholdExcess": (
        400,
        10153,
        "consumer inactive threshold exceeds system limit of {limit}",
    ),
    "MirrorInvalidTransformDestination": (400, 10154, "mirror transform: {err}"),
    "StreamTransformInvalidSource": (400, 10155, "stream transform source: {err}"),
    "StreamTransformInvalidDestination": (400, 10156, "stream transform: {err}"),
    "Pedantic": (400, 10157, "pedantic mode: {err}"),
    "StreamDuplicateMessageConflict": (409, 10158, "duplicate message id is in process"),
    "ConsumerPriorityPolicyWithoutGroup": (
        400,
        10159,
        "Setting PriorityPolicy requires at least one PriorityGroup to be set",
    ),
    "ConsumerInvalidPriorityGroup": (
        400,
        10160,
        "Provided priority group does not exist for this consumer",
    ),
    "ConsumerEmptyGroupName": (400, 10161, "Group name cannot be an empty string"),
    "ConsumerInvalidGroupName": (
        400,
        10162,
        "Valid priority group name must match A-Z, a-z, 0-9, -_/=)+ "
        "and may not exceed 16 characters",
    ),
    "StreamExpectedLastSeqPerSubjectNotReady": (
        503,
        10163,
        "expected last sequence per subject temporarily unavailable",
    ),
    "StreamWrongLastSequenceConstant": (400, 10164, "wrong last sequence"),
    "MessageTTLInvalid": (400, 10165, "invalid per-message TTL"),
    "MessageTTLDisabled": (400, 10166, "per-message TTL is disabled"),
    "StreamTooManyRequests": (429, 10167, "too many requests"),
    "MessageIncrDisabled": (400, 10168, "message counters is disabled"),
    "MessageIncrMissing": (400, 10169, "message counter increment is missing"),
    "MessageIncrPayload": (400, 10170, "message counter has payload"),
    "MessageIncrInvalid": (400, 10171, "message counter increment is invalid"),
    "MessageCounterBroken": (400, 10172, "message counter is broken"),
    "MirrorWithCounters": (400, 10173, "stream mirrors can not also calculate counters"),
    "AtomicPublishDisabled": (400, 10174, "atomic publish is disabled"),
    "AtomicPublishMissingSeq": (400, 10175, "atomic publish sequence is missing"),
    "AtomicPublishIncompleteBatch": (400, 10176, "atomic publish batch is incomplete"),
    "AtomicPublishUnsupportedHeaderBatch": (
        400,
        10177,
        "atomic publish unsupported header used: {header}",
    ),
    "ConsumerPushWithPriorityGroup": (
        400,
        10178,
        "priority groups can not be used with push consumers",
    ),
    "AtomicPublishInvalidBatchID": (400, 10179, "atomic publish batch ID is invalid"),
    "StreamMinLastSeq": (412, 10180, "min last sequence"),
    "ConsumerAckPolicyInvalid": (400, 10181, "consumer ack policy invalid"),
    "ConsumerReplayPolicyInvalid": (400, 10182, "consumer replay policy invalid"),
    "ConsumerAckWaitNegative": (400, 10183, "consumer ack wait needs to be positive"),
    "ConsumerBackOffNegative": (400, 10184, "consumer backoff needs to be positive"),
    "RequiredApiLevel": (412, 10185, "JetStream minimum api level required"),
    "MirrorWithMsgSchedules": (400, 10186, "stream mirrors can not also schedule messages"),
    "SourceWithMsgSchedules": (400, 10187, "stream source can not also schedule messages"),
    "MessageSchedulesDisabled": (400, 10188, "message schedules is disabled"),
    "MessageSchedulesPatternInvalid": (400, 10189, "message schedules pattern is invalid"),
    "MessageSchedulesTargetInvalid": (400, 10190, "message schedules target is invalid"),
    "MessageSchedulesTTLInvalid": (400, 10191, "message schedules invalid per-message TTL"),
    "MessageSchedulesRollupInvalid": (400, 10192, "message schedules invalid rollup"),
    "StreamExpectedLastSeqPerSubjectInvalid": (
        400,
        10193,
        "missing sequence for expected last sequence per subject",
    ),
    "StreamOfflineReason": (500, 10194, "stream is offline: {err}"),
    "ConsumerOfflineReason": (500, 10195, "consumer is offline: {err}"),
    "ConsumerPriorityGroupWithPolicyNone": (
        400,
        10196,
        "consumer can not have priority groups when policy is none",
    ),
    "ConsumerPinnedTTLWithoutPriorityPolicyNone": (
        400,
        10197,
        "PinnedTTL cannot be set when PriorityPolicy is none",
    ),
    "MirrorWithAtomicPublish": (400, 10198, "stream mirrors can not also use atomic publishing"),
    "AtomicPublishTooLargeBatch": (400, 10199, "atomic publish batch is too large: {size}"),
    "AtomicPublishInvalidBatchCommit": (400, 10200, "atomic publish batch commit is invalid"),
    "AtomicPublishContainsDuplicateMessage": (
        400,
        10201,
        "atomic publish batch contains duplicate message id",
    ),
    "ClusterServerMemberChangeInflight": (400, 10202, "cluster member change is in progress"),
    "MessageSchedulesSourceInvalid": (400, 10203, "message schedules source is invalid"),
    "ConsumerInvalidReset": (400, 10204, "invalid reset: {err}"),
    "BatchPublishDisabled": (400, 10205, "batch publish is disabled"),
    "BatchPublishInvalidPattern": (400, 10206, "batch publish pattern is invalid"),
    "BatchPublishInvalidBatchID": (400, 10207, "batch publish ID is invalid"),
    "BatchPublishUnknownBatchID": (400, 10208, "batch publish ID unknown"),
    "MirrorWithBatchPublish": (400, 10209, "stream mirrors can not also use batch publishing"),
    "AtomicPublishTooManyInflight": (429, 10210, "atomic publish too many inflight"),
    "BatchPublishTooManyInflight": (429, 10211, "batch publish too many inflight"),
    "MessageSchedulesSchedulerInvalid": (400, 10212, "message schedules invalid scheduler"),
    "MirrorDurableConsumerCfgInvalid": (400, 10213, "stream mirror consumer config is invalid"),
    "MirrorConsumerRequiresAckFC": (
        400,
        10214,
        "stream mirror consumer requires flow control ack policy",
    ),
    "SourceDurableConsumerCfgInvalid": (400, 10215, "stream source consumer config is invalid"),
    "SourceDurableConsumerDuplicateDetected": (
        400,
        10216,
        "duplicate stream source consumer detected",
    ),
    "SourceConsumerRequiresAckFC": (
        400,
        10217,
        "stream source consumer requires flow control ack policy",
    ),
    "ConsumerAckFCRequiresPush": (
        400,
        10218,
        "flow control ack policy requires a push based consumer",
    ),
    "ConsumerAckFCRequiresFC": (400, 10219, "flow control ack policy requires flow control"),
    "ConsumerAckFCRequiresMaxAckPending": (
        400,
        10220,
        "flow control ack policy requires max ack pending",
    ),
    "ConsumerAckFCRequiresNoAckWait": (
        400,
        10221,
        "flow control ack policy requires unset ack wait",
    ),
    "ConsumerAckFCRequiresNoMaxDeliver": (
        400,
        10222,
        "flow control ack policy requires unset max deliver",
    ),
    "MessageSchedulesTimeZoneInvalid": (400, 10223, "message schedules time zone is invalid"),
    "ClusterRescue": (400, 10224, "JetStream system rescue not applied: {err}"),
    "ConsumerStreamIdentityMismatch": (
        400,
        10225,
        "consumer's stream identity does not match: {msg}",
    ),
    "StreamReconfigureInProgress": (400, 10226, "stream reconfiguration already in progress"),
    "MessageSourceHdrNotAllowed": (400, 10227, "message stream source header is not allowed"),
}


class ResponseLater(Exception):
    """Raised by an API handler whose response goes out later (a clustered create: the new
    stream's or consumer's first leader answers it)."""


def js_error(name: str, **args: Any) -> ApiError:
    """The API error nats-server's `NewJS<name>Error(...)` builds, placeholders filled in."""
    code, err_code, description = ERRORS[name]
    for key, value in args.items():
        description = description.replace("{" + key + "}", str(value))
    return ApiError(code, err_code, description)


class ApiError(Exception):
    def __init__(self, code: int, err_code: int, description: str) -> None:
        super().__init__(description)
        self.code = code
        self.err_code = err_code
        self.description = description
        # The error a stream reports to a message trace where nats-server's differs from
        # this one's Go form, "description (err_code)" (see jetstream/stream.py).
        self.trace_text = ""

    def traced_as(self, text: str) -> ApiError:
        self.trace_text = text
        return self

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "err_code": self.err_code, "description": self.description}


# Shorthands for the errors the API raises most, named for where they are raised.


def bad_request() -> ApiError:
    return js_error("BadRequest")


def invalid_json(detail: str) -> ApiError:
    return js_error("InvalidJSON", err=detail)


def not_enabled_for_account() -> ApiError:
    return js_error("NotEnabledForAccount")


def stream_not_found() -> ApiError:
    return js_error("StreamNotFound")


def stream_mismatch() -> ApiError:
    return js_error("StreamMismatch")


def stream_name_exist() -> ApiError:
    return js_error("StreamNameExist")


def stream_subject_overlap() -> ApiError:
    return js_error("StreamSubjectOverlap")


def stream_invalid_config(detail: str) -> ApiError:
    return js_error("StreamInvalidConfig", err=detail)


def stream_name_path_separators() -> ApiError:
    return js_error("StreamNameContainsPathSeparators")


def replicas_not_supported() -> ApiError:
    return js_error("StreamReplicasNotSupported")


def no_message_found() -> ApiError:
    return js_error("NoMessageFound")


def sequence_not_found(seq: int) -> ApiError:
    return js_error("SequenceNotFound", seq=seq)


def stream_msg_delete_failed(detail: str) -> ApiError:
    return js_error("StreamMsgDeleteFailed", err=detail)


def stream_sealed() -> ApiError:
    return js_error("StreamSealed")


def stream_purge_failed(detail: str) -> ApiError:
    return js_error("StreamPurgeFailed", err=detail)


def stream_store_failed(detail: str) -> ApiError:
    return js_error("StreamStoreFailed", err=detail)


def message_size_exceeds() -> ApiError:
    return js_error("StreamMessageExceedsMaximum")


def stream_not_match() -> ApiError:
    return js_error("StreamNotMatch")


def wrong_last_sequence(seq: int) -> ApiError:
    return js_error("StreamWrongLastSequence", seq=seq)


def wrong_last_msg_id(msg_id: str) -> ApiError:
    return js_error("StreamWrongLastMsgID", id=msg_id)


def rollup_failed(detail: str) -> ApiError:
    return js_error("StreamRollupFailed", err=detail)


def insufficient_resources() -> ApiError:
    return js_error("InsufficientResources")


def consumer_not_found() -> ApiError:
    return js_error("ConsumerNotFound")


def consumer_name_exist() -> ApiError:
    return js_error("ConsumerNameExist")


def consumer_create(detail: str) -> ApiError:
    return js_error("ConsumerCreate", err=detail)


def consumer_filter_mismatch() -> ApiError:
    return js_error("ConsumerCreateFilterSubjectMismatch")


def consumer_name_path_separators() -> ApiError:
    return js_error("ConsumerNameContainsPathSeparators")


def consumer_wq_requires_explicit_ack() -> ApiError:
    return js_error("ConsumerWQRequiresExplicitAck")


def consumer_wq_not_unique() -> ApiError:
    return js_error("ConsumerWQConsumerNotUnique")


def consumer_wq_multiple_unfiltered() -> ApiError:
    return js_error("ConsumerWQMultipleUnfiltered")


def consumer_invalid_policy(detail: str) -> ApiError:
    return js_error("ConsumerInvalidPolicy", err=detail)
