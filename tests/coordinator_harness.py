"""A tiny client-side driver for the pure coordinator: sends feed events, moves time, finds responses."""

from __future__ import annotations

from streaming.coordinator import CoordinatorConfig, GroupCoordinator, parse_event

RANGE = [{"name": "range", "topics": ["t"]}]


class Harness:
    def __init__(self, group_id: str = "g", **config) -> None:
        config.setdefault("group_initial_rebalance_delay_ms", 0)
        config.setdefault("assignment_mode", "leader")  # scripts send the leader's assignment themselves
        self.config = CoordinatorConfig(**config)
        self.coordinator = GroupCoordinator(self.config)
        self.group_id = group_id
        self.now = 1_000
        self.events: list[dict] = []
        self.outputs: list[dict] = []

    # --- sending -------------------------------------------------------------------------------------------
    def send(self, **fields) -> list[dict]:
        fields.setdefault("group_id", self.group_id)
        fields.setdefault("ts", self.now)
        event, error = parse_event(fields)
        assert error is None, error
        self.events.append(event)
        out = self.coordinator.handle(event)
        self.outputs.extend(out)
        return out

    def tick(self, ms: int) -> list[dict]:
        self.now += ms
        out = self.coordinator.advance(self.now)
        self.outputs.extend(out)
        return out

    def join(
        self,
        member_id: str = "",
        instance_id: str | None = None,
        protocols=None,
        session: int = 10_000,
        rebalance: int | None = None,
        client_id: str = "consumer",
        **extra,
    ) -> list[dict]:
        return self.send(
            type="join",
            member_id=member_id,
            group_instance_id=instance_id,
            client_id=client_id,
            session_timeout_ms=session,
            rebalance_timeout_ms=rebalance or session,
            protocols=RANGE if protocols is None else protocols,
            **extra,
        )

    def new_member(self, client_id: str = "consumer", **kw) -> str:
        """A dynamic member's two-step join (KIP-394): ask for an id, then join with it."""
        first = self.join(client_id=client_id, **kw)
        required = one(first, "join_response")
        assert required["error"] == "MEMBER_ID_REQUIRED", required
        self.join(member_id=required["member_id"], client_id=client_id, **kw)
        return required["member_id"]

    def heartbeat(self, member_id: str, generation: int, instance_id: str | None = None) -> str:
        out = self.send(type="heartbeat", member_id=member_id, group_instance_id=instance_id, generation=generation)
        return one(out, "heartbeat_response")["error"]

    def sync(self, member_id: str, generation: int, assignments=None, instance_id=None) -> list[dict]:
        fields = dict(type="sync", member_id=member_id, group_instance_id=instance_id, generation=generation)
        if assignments is not None:
            fields["assignments"] = assignments
        return self.send(**fields)

    def commit(self, member_id: str = "", generation: int = -1, offsets=(("t", 0, 10),), **kw) -> list[dict]:
        return self.send(
            type="commit",
            member_id=member_id,
            generation=generation,
            offsets=[{"topic": t, "partition": p, "offset": o} for t, p, o in offsets],
            **kw,
        )

    def stable_group(self, n: int, **kw) -> list[str]:
        """n dynamic members joined, the round completed, the leader synced an (empty) assignment."""
        ids = [self.new_member(client_id=f"c{i}", **kw) for i in range(n)]
        self.tick(0)
        self.sync(self.leader(), self.generation())
        for m in ids:
            if m != self.leader():
                self.sync(m, self.generation())
        assert self.state() == "Stable"
        return ids

    # --- looking ---------------------------------------------------------------------------------------------
    def group(self):
        return self.coordinator.groups[self.group_id]

    def state(self) -> str:
        g = self.coordinator.groups.get(self.group_id)
        return g.state.value if g is not None else "Dead"

    def generation(self) -> int:
        return self.group().generation

    def leader(self) -> str | None:
        return self.group().leader_id


def of_type(outputs: list[dict], kind: str, member_id: str | None = None) -> list[dict]:
    return [o for o in outputs if o["type"] == kind and (member_id is None or o.get("member_id") == member_id)]


def one(outputs: list[dict], kind: str, member_id: str | None = None) -> dict:
    found = of_type(outputs, kind, member_id)
    assert len(found) == 1, f"expected one {kind} for {member_id}, got {found}"
    return found[0]
