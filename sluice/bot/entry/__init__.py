"""Entry points: the commands that start the bot (``serve``, ``action``, ``pr``, ``demo``) and
the service's app factory and settings. They wire the stages below; nothing imports them."""
