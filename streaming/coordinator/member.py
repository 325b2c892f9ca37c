"""One member of a classic group, as the coordinator remembers it between requests."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

Partition = tuple[str, int]


@dataclass
class Protocol:
    """One (name, metadata) entry of a JoinGroup request, the metadata already decoded."""

    name: str
    topics: list[str]
    owned_partitions: list[Partition] | None = None  # None: the client did not say
    generation: int = -1
    user_data: str | None = None  # base64
    rack: str | None = None
    version: int | None = None  # the embedded subscription's version, when known

    @classmethod
    def from_event(cls, p: dict) -> "Protocol":
        owned = p.get("owned_partitions")
        return cls(
            p["name"],
            list(p.get("topics", [])),
            None if owned is None else [(t, int(n)) for t, n in owned],
            int(p.get("generation", -1)),
            p.get("user_data"),
            p.get("rack"),
            p.get("version"),
        )


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[Protocol]
    assignment: list[Partition] = field(default_factory=list)
    assignment_generation: int = -1
    awaiting_join: bool = False
    awaiting_sync: bool = False
    is_new: bool = False
    # None while the member is waiting in a join round: then the round's own timeout governs it.
    session_deadline: int | None = None
    last_heartbeat_ts: int = 0
    stand_in: bool = False  # observe mode: named by the broker before its own join arrived
    # Observe mode: when a follower's unchanged rejoin was answered without a round (Kafka's rule); a round that opens
    # before its answer shows was under way by then.
    rejoin_ts: int | None = None

    @classmethod
    def from_join(cls, member_id: str, e: dict) -> "Member":
        """The member a JoinGroup request describes."""
        return cls(
            member_id,
            e["group_instance_id"],
            e["client_id"],
            e["client_host"],
            e["session_timeout_ms"],
            e["rebalance_timeout_ms"],
            e["protocol_type"],
            [Protocol.from_event(p) for p in e["protocols"]],
        )

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def protocol(self, name: str | None) -> Protocol | None:
        return next((p for p in self.protocols if p.name == name), None)

    def protocol_names(self) -> list[str]:
        return [p.name for p in self.protocols]

    def vote(self, candidates: set[str]) -> str | None:
        """A member votes for the first protocol in its own preference order that every member supports (None: it
        supports none of them)."""
        return next((p.name for p in self.protocols if p.name in candidates), None)

    def same_protocols(self, other: list[Protocol]) -> bool:
        """Kafka compares the whole (name, metadata) list byte for byte: a change in owned partitions, generation
        or user data counts as a change (a cooperative member's follow-up join must start a new round)."""
        return self.protocols == other

    def to_dict(self) -> dict:
        d = asdict(self)
        d["assignment"] = [list(tp) for tp in self.assignment]
        for p in d["protocols"]:
            if p["owned_partitions"] is not None:
                p["owned_partitions"] = [list(tp) for tp in p["owned_partitions"]]
        return d

    def to_row(self) -> list:
        """The fields in declaration order (the state's compact form: no field names per member)."""
        row = [getattr(self, name) for name in _MEMBER_FIELDS]
        row[_PROTOCOLS] = [
            [p.name, p.topics, p.owned_partitions, p.generation, p.user_data, p.rack]
            + ([p.version] if p.version is not None else [])
            for p in self.protocols
        ]
        return row

    @classmethod
    def from_row(cls, row: list) -> "Member":
        member = cls(*row)
        member.protocols = [
            Protocol(
                name,
                list(topics),
                None if owned is None else [(t, int(n)) for t, n in owned],
                generation,
                user_data,
                rack,
                *version,
            )
            for name, topics, owned, generation, user_data, rack, *version in row[_PROTOCOLS]
        ]
        member.assignment = [(t, int(n)) for t, n in member.assignment]
        return member

    @classmethod
    def from_dict(cls, d: dict) -> "Member":
        d = dict(d)
        d["protocols"] = [Protocol.from_event(p) for p in d["protocols"]]
        d["assignment"] = [(t, int(n)) for t, n in d["assignment"]]
        return cls(**d)


_MEMBER_FIELDS = tuple(f.name for f in fields(Member))
_PROTOCOLS = _MEMBER_FIELDS.index("protocols")
