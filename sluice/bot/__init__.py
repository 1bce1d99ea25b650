"""The forge side: pull requests, comments, checks, reviews, webhooks. Imports core, never the reverse."""
