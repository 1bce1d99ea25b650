"""The data-deployment engine: models, plans, state, Spark. Never imports sluice.bot."""
