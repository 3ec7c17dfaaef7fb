"""A server's options (services/server/config.py ServerConfig) are built once from the
flags and never changed after: every part the composition root hands them to reads the
same ones. A variant is a new value (dataclasses.replace), the original left as it was."""
from __future__ import annotations

import dataclasses

import pytest

from morphz.services.server.config import ServerConfig


def test_server_config_is_frozen_and_a_variant_is_a_new_value():
    config = ServerConfig(data_dir="/data", listen="127.0.0.1:0")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.listen = "0.0.0.0:7000"  # type: ignore[misc]
    variant = dataclasses.replace(config, listen="0.0.0.0:7000")
    assert (variant.listen, variant.data_dir) == ("0.0.0.0:7000", "/data")
    assert config.listen == "127.0.0.1:0"
    assert hash(config) == hash(ServerConfig(data_dir="/data", listen="127.0.0.1:0"))
