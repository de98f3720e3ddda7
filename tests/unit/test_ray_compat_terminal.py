"""The Ray assumptions behind a quiet terminal (``raypress.dag.ray_compat`` 16 and 17), one test each,
named after the assumption; checked without a running Ray (the order of assumption 6 is checked on
Ray in tests/integration/test_quiet_terminal.py)."""

from __future__ import annotations

import inspect
import logging

from raypress.dag import ray_compat


def _stream_handlers(logger: logging.Logger) -> list[logging.Handler]:
    return [h for h in logger.handlers if isinstance(h, logging.StreamHandler)
            and not isinstance(h, logging.FileHandler)]


def test_move_ray_log_handlers__rays_loggers_print_through_their_own_stream_handlers(tmp_path, capfd):
    """Assumption 16: "ray" and "ray.data" print through stream handlers of their own (propagation off),
    the token-auth warning's logger propagates to "ray", and swapping the handlers moves what they log."""
    import importlib

    from ray._private.authentication import authentication_token_setup

    importlib.import_module("ray.data")  # its logger's configuration comes with its import

    ray_logger, data_logger = logging.getLogger("ray"), logging.getLogger("ray.data")
    saved = {lg: list(lg.handlers) for lg in (ray_logger, data_logger, logging.getLogger("ray.serve"))}
    assert _stream_handlers(ray_logger) and not ray_logger.propagate
    assert _stream_handlers(data_logger) and not data_logger.propagate
    token_logger = authentication_token_setup.logger
    assert token_logger.name.startswith("ray.") and token_logger.propagate
    assert "Token authentication is enabled for this Ray cluster" in inspect.getsource(
        authentication_token_setup._warn_token_auth_enabled)
    target = logging.FileHandler(tmp_path / "ray.log")
    target.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    try:
        assert ray_compat.move_ray_log_handlers(target) >= 2
        assert ray_compat.move_ray_log_handlers(target) == 0  # nothing left to move, nothing doubled
        token_logger.warning("token auth, to the file")
        data_logger.warning("ray data, to the file")
        target.flush()
        assert "to the file" not in capfd.readouterr().err
        assert (tmp_path / "ray.log").read_text().splitlines() == [
            "WARNING token auth, to the file", "WARNING ray data, to the file"]
    finally:
        for lg, handlers in saved.items():
            lg.handlers[:] = handlers
        target.close()


def test_ray_init_keeps_signal_handlers__ray_sets_sigterm_handlers_through_one_module_attribute():
    """Assumption 17: ray.init and its node install SIGTERM handlers by calling
    ``ray._private.utils.set_sigterm_handler`` through the module (so replacing the attribute works)."""
    import signal

    import ray._private.node as node
    import ray._private.worker as worker
    from ray._private import utils

    for module in (worker, node):
        assert "ray._private.utils.set_sigterm_handler(sigterm_handler)" in inspect.getsource(module)
    before = signal.getsignal(signal.SIGTERM)
    with ray_compat.ray_init_keeps_signal_handlers():
        utils.set_sigterm_handler(lambda *_: None)
        assert signal.getsignal(signal.SIGTERM) is before
    assert utils.set_sigterm_handler is not None and "ray_compat" not in inspect.getsourcefile(
        utils.set_sigterm_handler)
