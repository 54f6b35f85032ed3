"""fleet/sharing.py's choice: the one place that decides how a generation's answer is shared."""

from __future__ import annotations

from streaming.core import config
from streaming.engines.deterministic import DeterministicEngine
from streaming.fleet.engine import ChannelLayerEngine
from streaming.fleet.protocol import ABORT_CODES, HANDED_OVER
from streaming.fleet.sharing import FleetSharing, sharing_for
from streaming.generations.sharing import ALONE


def test_a_local_engine_shares_with_nobody_and_the_fleet_engine_with_every_web_process():
    fleet = ChannelLayerEngine.from_config(config.current())
    assert sharing_for(DeterministicEngine(ttft_s=0, tokens_per_s=0)) is ALONE
    shared = sharing_for(fleet)
    assert isinstance(shared, FleetSharing) and shared.fleet is fleet
    assert sharing_for(fleet) is shared  # one for the process's engine


def test_the_protocols_codes_are_the_abort_reasons():
    assert HANDED_OVER == "handed_over"
    assert ABORT_CODES == ("cancelled", "client_disconnected", "server_shutdown")
