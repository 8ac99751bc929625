"""Command-line commands that work on users' own files (``latentstitch bridge``, ``latentstitch compare``); each
module defines ``HELP``, ``add_arguments(parser)`` and ``main(args)`` (see ``latentstitch.cli``)."""
