"""Operations demo: background work on Celery (reports, event feeds, rollouts)."""
