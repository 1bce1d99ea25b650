"""The durable job queue in the state database, and the worker that hands its jobs to the flow."""
