"""What a Junos configuration's security policies, source-NAT rules and address books say about
sources: which prefixes each rule translates and each policy permits (importer/usecase.py weighs them
against the client prefixes)."""

from __future__ import annotations

from dataclasses import dataclass, field
from ipaddress import IPv4Network

from .parse import Statement

ANY4 = IPv4Network("0.0.0.0/0")


@dataclass
class NatRule:
    """One source-NAT rule: the words of its `match source-address` (prefixes) and `source-address-name`
    (address-book names), each with its statement, and what its `then source-nat` does (pool P,
    interface, off)."""

    rule_set: str
    name: str
    sources: list[tuple[str, Statement]] = field(default_factory=list)
    pool: str | None = None
    action: str | None = None  # then source-nat: pool, interface or off
    stmts: list[Statement] = field(default_factory=list)


@dataclass
class Policy:
    """One zone-pair security policy: the words of its `match source-address` and whether it permits."""

    from_zone: str
    to_zone: str
    name: str
    sources: list[tuple[str, Statement]] = field(default_factory=list)
    permit: bool = False
    stmts: list[Statement] = field(default_factory=list)


def policy_statement(policies: list[Policy], rest: tuple[str, ...], s: Statement) -> None:
    """`security policies from-zone A to-zone B policy P ...` (REST: the path after `security`)."""
    key = (rest[2], rest[4], rest[6])
    policy = next((p for p in policies if (p.from_zone, p.to_zone, p.name) == key), None)
    if policy is None:
        policy = Policy(*key)
        policies.append(policy)
    policy.stmts.append(s)
    tail = rest[7:]
    if tail[:2] == ("match", "source-address"):
        policy.sources += [(word, s) for word in tail[2:]]
    elif tail[:2] == ("then", "permit"):
        policy.permit = True


def nat_rule_statement(rules: list[NatRule], pools: list[str], rest: tuple[str, ...], s: Statement) -> None:
    """`security nat source rule-set RS rule R ...`; POOLS collects the pools the rules use, in order."""
    rule = next((r for r in rules if (r.rule_set, r.name) == (rest[3], rest[5])), None)
    if rule is None:
        rule = NatRule(rest[3], rest[5])
        rules.append(rule)
    rule.stmts.append(s)
    tail = rest[6:]
    if tail[:2] in (("match", "source-address"), ("match", "source-address-name")):
        rule.sources += [(word, s) for word in tail[2:]]
    elif tail[:3] in (("then", "source-nat", "interface"), ("then", "source-nat", "off")):
        rule.action = tail[2]
    elif tail[:3] == ("then", "source-nat", "pool") and len(tail) >= 4:
        rule.pool, rule.action = tail[3], "pool"
        if tail[3] not in pools:
            pools.append(tail[3])
        s.tags.append("nat-rule")


def address_book_statement(book: dict[str, list[str]], rest: tuple[str, ...]) -> None:
    """`address NAME PREFIX` (or `address NAME ip-prefix PREFIX`) and `address-set NAME address NAME`,
    global or of a zone; other address kinds (ranges, DNS names) stay unknown."""
    kind, name, value = rest[0], rest[1], rest[2:]
    if kind == "address" and value[:1] == ("ip-prefix",):
        value = value[1:]
    if kind == "address-set" and value[:1] in (("address",), ("address-set",)):
        value = value[1:]
    elif kind == "address-set":
        return
    if len(value) == 1 and (kind == "address-set" or "/" in value[0] or value[0].replace(".", "").isdigit()):
        book.setdefault(name, []).append(value[0])


def resolve(book: dict[str, list[str]], word: str, depth: int = 0) -> list[IPv4Network] | None:
    """The IPv4 prefixes a policy or NAT rule's source word stands for: a prefix, `any`, or an
    address-book name (address or address set); [] for IPv6 ones; None for a name no address book of
    the file has (it may come from a configuration group the file does not carry)."""
    if word in ("any", "any-ipv4"):
        return [ANY4]
    if word == "any-ipv6":
        return []
    values = book.get(word)  # a name may look like a prefix (sfw_source_prefix_172.80.0.0/12)
    if values is None:
        try:
            return [IPv4Network(word, strict=False)]
        except ValueError:
            return [] if ":" in word and "/" in word else None
    if depth > 8:  # address sets that contain each other
        return None
    out: list[IPv4Network] = []
    for value in values:
        nets = resolve(book, value, depth + 1)
        if nets is None:
            return None
        out += [n for n in nets if n not in out]
    return out
