"""What several test modules share, so that no test module imports another: the webhook
service harnesses for GitHub (``github_service``) and GitLab (``gitlab_service``), and the
Spark lifecycle harness (``world``)."""
