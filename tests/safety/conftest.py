"""The sandbox's tests use the toolbox's workspace: files, links leading out, and a directory outside it."""

from tests.toolbox.conftest import outside, ws  # noqa: F401 - fixtures
