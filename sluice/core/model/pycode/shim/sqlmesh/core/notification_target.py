"""``sqlmesh.core.notification_target``: where SQLMesh sends notices (Sluice reads past
``notification_targets``; the stand-ins only let config.py import and build them)."""

from __future__ import annotations

from enum import StrEnum

from .config.recorded import Recorded


class NotificationEvent(StrEnum):
    APPLY_START = "apply_start"
    APPLY_END = "apply_end"
    RUN_START = "run_start"
    RUN_END = "run_end"
    MIGRATION_START = "migration_start"
    MIGRATION_END = "migration_end"
    APPLY_FAILURE = "apply_failure"
    RUN_FAILURE = "run_failure"
    AUDIT_FAILURE = "audit_failure"
    MIGRATION_FAILURE = "migration_failure"


class NotificationTarget(Recorded):
    """A notification target; each kind sets its ``type``."""


class ConsoleNotificationTarget(NotificationTarget):
    type_name = "console"


class BasicSMTPNotificationTarget(NotificationTarget):
    type_name = "smtp"


class SlackApiNotificationTarget(NotificationTarget):
    type_name = "slack_api"


class SlackWebhookNotificationTarget(NotificationTarget):
    type_name = "slack_webhook"
