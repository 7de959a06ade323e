"""Bubblewrap's egress filter reaches only global unicast destinations (issue 27, hole 3).

It dropped the host's own address but not the rest of its subnet (the host's neighbours, its gateway) nor the
documentation and other special-purpose ranges the host may route. The filter's refused set is read back from the
ruleset the sandbox gets and checked address by address against Python's own registry of global addresses; the
live test (test_runtime_abuse_isolation.py) connects to the host's neighbours from inside."""

from __future__ import annotations

import ipaddress
import re

from sandbox.runtime.egress_filter import BLOCKED, EgressPolicy, ruleset


def _refused(rules: str) -> list[ipaddress.IPv4Network]:
    found = re.search(r"ip daddr \{ ([^}]*) \} reject", rules)
    assert found, rules
    return [ipaddress.ip_network(item.strip()) for item in found.group(1).split(",")]


def test_every_range_that_is_not_global_is_refused_and_nothing_global_is():
    refused = _refused(ruleset(EgressPolicy(), []))
    for network in (ipaddress.ip_network(block) for block in BLOCKED):
        # none refused in vain (192.0.0.0/24 holds two global /32s, refused with the rest: conservative)
        assert not network[0].is_global or network[0].is_multicast, network
    # Python's registry: a sample of every /16 (and of each special /24) — not global means refused.
    samples = [ipaddress.ip_address(f"{a}.{b}.0.1") for a in range(256) for b in (0, 88, 99, 168, 255)]
    samples += [
        ipaddress.ip_address(f"{net}.7")
        for net in ("192.0.0", "192.0.2", "198.51.100", "203.0.113", "198.18.0", "198.19.255")
    ]
    samples += [
        ipaddress.ip_address(text)
        for text in ("255.255.255.255", "0.0.0.0", "100.127.255.254", "169.254.169.254", "240.0.0.1", "224.0.0.251")
    ]
    for address in samples:
        inside = any(address in network for network in refused)
        if not address.is_global or address.is_multicast or address.is_reserved:
            assert inside, address
        elif not inside:
            assert address.is_global


def test_the_hosts_whole_subnets_are_refused_whatever_their_range():
    rules = ruleset(EgressPolicy(), ["127.0.0.1/8", "192.0.2.2/24", "8.8.4.9/28", "8.8.4.10/24", "1.2.3.4"])
    refused = _refused(rules)
    for neighbour in ("192.0.2.1", "192.0.2.254", "8.8.4.1", "8.8.4.200", "1.2.3.4"):
        assert any(ipaddress.ip_address(neighbour) in network for network in refused), neighbour
    assert not any(ipaddress.ip_address("8.8.8.8") in network for network in refused)
    # overlapping subnets are merged (nft refuses overlapping intervals in one set)
    assert sum(1 for network in refused if ipaddress.ip_address("8.8.4.9") in network) == 1
    # the operator's allow-list is accepted before the refusal
    allowed = ruleset(EgressPolicy.from_strings(["192.0.2.1:8080"]), ["192.0.2.2/24"])
    assert allowed.index("ip daddr 192.0.2.1/32 tcp dport 8080 accept") < allowed.index("reject")
