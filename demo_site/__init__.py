"""The mcp_tools demo project."""

# Load the Celery app when Django starts, so shared tasks use it (Celery's Django guide).
from .celery import app as celery_app

__all__ = ("celery_app",)
