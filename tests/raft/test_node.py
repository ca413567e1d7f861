"""The sans-IO RAFT node driven as a whole group on a simulated network (tests/raft/simulation.py):
RAFT's safety properties under random delays, drops, partitions and crashes, and nats-server's
rules for leader transfer, catch-up, snapshots and membership."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pynatsd.raft.node import RaftState, Timings
from pynatsd.raft.wire import Entry, EntryType, PeerState
from raft.simulation import Member, Network


def agreed(net: Network, members: list[Member]) -> None:
    """Every member holds the same committed entries as the group's history, up to its commit."""
    for member in members:
        node = member.node
        assert node is not None
        for index in range(node.papplied + 1, node.commit + 1):
            assert member.committed.get(index) == net.history[index], (member.id, index)


def data_committed(net: Network) -> list[bytes]:
    return [e.data for index in sorted(net.history) for e in net.history[index]]


def test_three_nodes_elect_one_leader_and_replicate() -> None:
    net = Network(3, seed=1)
    leader = net.wait_for_leader()
    for i in range(20):
        assert net.propose(b"m%d" % i)
    net.run_for(3)
    assert data_committed(net) == [b"m%d" % i for i in range(20)]
    live = net.live()
    assert all(m.node is not None and m.node.commit == leader.node.commit for m in live)  # type: ignore[union-attr]
    agreed(net, live)
    assert {m.node.leader for m in live if m.node} == {leader.id}


def test_election_follows_nats_server_timeouts() -> None:
    """The first leader comes after one election timeout (4-9 s), not before."""
    net = Network(3, seed=7)
    net.run_for(3.9)
    assert not net.leaders()
    net.wait_for_leader(limit=6)
    assert 4.0 <= net.now <= 10.0


def test_a_leader_killed_is_replaced_and_nothing_acked_is_lost() -> None:
    net = Network(3, seed=3)
    first = net.wait_for_leader()
    for i in range(10):
        net.propose(b"a%d" % i)
    net.run_for(2)
    acked = data_committed(net)
    net.crash(first.id)
    second = net.wait_for_leader(limit=30)
    assert second.id != first.id
    for i in range(10):
        net.propose(b"b%d" % i)
    net.run_for(2)
    net.start(first.id)
    net.run_for(5)
    got = data_committed(net)
    assert got[: len(acked)] == acked
    assert got[len(acked) :] == [b"b%d" % i for i in range(10)]
    agreed(net, net.live())
    assert first.node is not None and first.node.commit == second.node.commit  # type: ignore[union-attr]


def test_step_down_transfers_the_lead() -> None:
    net = Network(3, seed=5)
    leader = net.wait_for_leader()
    net.run_for(2)  # everyone heard from recently: all are healthy targets
    assert leader.node is not None
    target = next(m.id for m in net.live() if m.id != leader.id)
    assert leader.node.step_down(target)
    net.drain(leader)
    net.run_for(1)
    new = net.wait_for_leader(limit=5)
    assert new.id == target


def test_minority_cannot_commit_and_majority_goes_on() -> None:
    net = Network(3, seed=11)
    leader = net.wait_for_leader()
    others = [m.id for m in net.live() if m.id != leader.id]
    net.partition({leader.id}, set(others))
    assert net.propose(b"lost")  # the old leader still takes it, but no quorum acks it
    net.run_for(25)
    assert b"lost" not in data_committed(net)
    majority = [m for m in net.leaders() if m.id in others and m.leads]
    assert len(majority) == 1
    majority[0].node.propose((Entry(EntryType.NORMAL, b"kept"),))  # type: ignore[union-attr]
    net.drain(majority[0])
    net.run_for(2)
    assert b"kept" in data_committed(net)
    # The old leader stepped down when it lost its quorum (10 s without hearing from one).
    assert leader.node is not None and leader.node.state is not RaftState.LEADER
    net.heal()
    net.run_for(10)
    assert b"lost" not in data_committed(net)
    agreed(net, net.live())
    assert len({m.node.commit for m in net.live() if m.node}) == 1


def test_a_wiped_node_catches_up_from_the_log() -> None:
    net = Network(3, seed=13)
    net.wait_for_leader()
    follower = next(m for m in net.live() if not (m.node and m.node.is_leader))
    net.crash(follower.id)
    for i in range(300):
        net.propose(b"x" * 100 + b"%d" % i)
    net.run_for(3)
    # The disk is lost: a new empty log and files (the peers are known from the others).
    from pynatsd.raft.log import MemoryLog
    from pynatsd.raft.node import MemoryFiles

    follower.log, follower.files = MemoryLog(), MemoryFiles()
    follower.files.peer_state = PeerState(tuple(net.members), 3)
    net.start(follower.id)
    net.run_for(10)
    assert follower.node is not None
    leader = net.leaders()[0]
    assert leader.node is not None and follower.node.commit == leader.node.commit
    agreed(net, net.live())


def test_a_node_behind_a_snapshot_is_sent_the_snapshot() -> None:
    net = Network(3, seed=17)
    leader = net.wait_for_leader()
    follower = next(m for m in net.live() if m.id != leader.id)
    net.crash(follower.id)
    for i in range(50):
        net.propose(b"s%d" % i)
    net.run_for(2)
    assert leader.node is not None
    assert leader.node.install_snapshot(b"STATE-UP-TO-%d" % leader.node.applied)
    assert leader.node.log.first_index > 1
    net.start(follower.id)
    net.run_for(10)
    assert follower.node is not None and follower.node.commit == leader.node.commit
    assert follower.node.papplied == leader.node.papplied


def test_a_new_peer_that_answers_is_added_and_a_removed_one_leaves() -> None:
    net = Network(3, seed=19)
    leader = net.wait_for_leader()
    assert leader.node is not None
    # A fourth node whose peer state names all four joins: the leader hears its responses.
    from pynatsd.raft.log import MemoryLog
    from pynatsd.raft.node import MemoryFiles

    ids = (*net.members, "N0000009")
    files = MemoryFiles()
    files.peer_state = PeerState(ids, 4)
    net.members["N0000009"] = Member("N0000009", MemoryLog(), files)
    net.start("N0000009")
    net.run_for(10)
    assert "N0000009" in leader.node.peers
    assert leader.node.cluster_size == 4 and leader.node.quorum == 3
    assert all(m.node and "N0000009" in m.node.peers for m in net.live())
    victim = next(m.id for m in net.live() if m.id not in (leader.id, "N0000009"))
    assert leader.node.propose_remove_peer(victim)
    net.drain(leader)
    net.run_for(3)
    assert victim not in leader.node.peers and leader.node.cluster_size == 3


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    size=st.sampled_from([3, 5]),
    drop=st.sampled_from([0.0, 0.02, 0.1]),
    faults=st.lists(
        st.tuples(
            st.sampled_from(["crash", "restart", "cut", "heal", "propose"]), st.integers(0, 4)
        ),
        max_size=25,
    ),
)
def test_safety_and_recovery_under_random_faults(
    seed: int, size: int, drop: float, faults: list[tuple[str, int]]
) -> None:
    """Whatever happens: at most one leader per term, one content per committed index on every
    node, and once the network heals and every node is up, one leader and every node agreeing."""
    net = Network(size, seed=seed, drop=drop, max_delay=0.2, timings=Timings().scaled(0.5))
    ids = list(net.members)
    counter = 0
    for action, which in faults:
        node_id = ids[which % size]
        if action == "crash":
            net.crash(node_id)
        elif action == "restart" and net.members[node_id].node is None:
            net.start(node_id)
        elif action == "cut":
            net.partition({node_id}, set(ids) - {node_id})
        elif action == "heal":
            net.heal()
        else:
            for _ in range(3):
                counter += 1
                net.propose(b"p%d" % counter)
        net.run_for(net.rng.uniform(0.1, 6))
    for term, leaders in net.leaders_by_term.items():
        assert len(leaders) == 1, (term, leaders)
    net.heal()
    net.drop = 0.0
    for node_id in ids:
        if net.members[node_id].node is None:
            net.start(node_id)
    # A proposal to a leader about to be deposed is lost, never acked: a client tries again.
    for _ in range(20):
        net.wait_for_leader(limit=120)
        net.propose(b"final")
        net.run_for(3)
        if b"final" in data_committed(net):
            break
    assert data_committed(net).count(b"final") >= 1
    net.run_for(5)
    live = net.live()
    assert len({m.node.commit for m in live if m.node}) == 1
    agreed(net, live)
    for term, leaders in net.leaders_by_term.items():
        assert len(leaders) == 1, (term, leaders)


def test_a_paused_follower_does_not_stand_for_election() -> None:
    """PauseApply: while its upper layer catches up, a follower never campaigns, even with
    its leader gone; once resumed it does again. A leader cannot pause."""
    net = Network(3, seed=11)
    leader = net.wait_for_leader()
    assert leader.node is not None and not leader.node.pause_apply()
    net.run_for(1)
    followers = [m for m in net.live() if m.id != leader.id]
    for member in followers:
        assert member.node is not None and member.node.pause_apply()
    net.crash(leader.id)
    net.run_for(30)
    assert not net.leaders()
    paused = followers[0].node
    assert paused is not None
    paused.resume_apply()
    net.drain(followers[0])
    net.run_for(12)
    assert [m.id for m in net.leaders()] == [followers[0].id]
