"""``gaml``: the command line for people. ``gaml --home DIR COMMAND …``; ``gaml COMMAND --help`` for details.

Secrets come from the environment, never from arguments: ``GAML_PASSPHRASE`` (a passphrase stretched by Argon2id), or
``GAML_KEYCHAIN_KEY`` (64 hex characters, for unattended nodes). Without either, an interactive terminal is asked.
Exit codes (``gaml --help`` lists them): 0 success, 1 not found, 2 usage or bad input, 3 store or keychain failure,
4 a failure after part of the work was committed, 5 refused (policy, unknown principal, bad token), 70 internal error.
"""

from gaml.node.cli.main import main as main

__all__ = ["main"]
