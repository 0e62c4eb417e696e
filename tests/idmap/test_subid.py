"""podkit.idmap.subid: /etc/subuid and /etc/subgid lines, and a rootless user's map (pure;
the files are ones the tests write)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podkit import idmap

R = idmap.IDRange


def test_parse_skips_comments_and_blank_lines_and_says_where_each_line_is(
        tmp_path: Path) -> None:
    f = tmp_path / "subuid"
    f.write_text("# users\n\nalice:100000:65536\n  1001:165536:65536  \nalice:300000:10\n")
    got = idmap.read_subids(f)
    assert got == (
        idmap.SubID(owner="alice", start=100000, count=65536, where=f"{f}:3"),
        idmap.SubID(owner="1001", start=165536, count=65536, where=f"{f}:4"),
        idmap.SubID(owner="alice", start=300000, count=10, where=f"{f}:5"),
    )
    assert got[0].end == 165536 and got[0].describe() == f"100000:65536 ({f}:3)"
    assert idmap.read_subids(tmp_path / "missing") == ()


@pytest.mark.parametrize(("line", "why"), [
    ("alice:100000", "want <user name or uid>:<first ID>:<count>"),
    ("alice:1:2:3", "want <user name or uid>:<first ID>:<count>"),
    (":100000:65536", "want <user name or uid>:<first ID>:<count>"),
    ("alice:x:65536", "first ID 'x' is not a decimal number"),
    ("alice:-1:65536", "first ID '-1' is not a decimal number"),
    ("alice:100000:", "count '' is not a decimal number"),
    ("alice:100000:0", "count is 0"),
    ("alice:4294967290:10", "the range ends past the last ID 4294967294"),
    ("alice:\uff11:2", "first ID '\uff11' is not a decimal number"),  # a fullwidth 1
])
def test_a_bad_line_is_refused_with_its_file_line_and_text(tmp_path: Path, line: str,
                                                           why: str) -> None:
    f = tmp_path / "subgid"
    f.write_text(f"bob:200000:65536\n{line}\n")
    with pytest.raises(idmap.IDMapError) as e:
        idmap.read_subids(f)
    assert str(e.value) == f"{f}:2: {line!r}: {why}"


def test_a_users_lines_match_by_name_or_uid_in_file_order() -> None:
    lines = idmap.parse_subids("bob:1:5\nalice:10:5\n1000:20:5\nALL:30:5\n1000x:40:5\n", "f")
    assert [s.start for s in idmap.owned_subids(lines, "alice", 1000)] == [10, 20]
    assert idmap.owned_subids(lines, "carol", 1002) == ()


def test_rootless_map_is_podmans_own_id_then_the_ranges() -> None:
    subuid = idmap.parse_subids("alice:100000:65536\nbob:1:1\nalice:300000:1000\n", "/etc/subuid")
    subgid = idmap.parse_subids("1000:200000:65536\n", "/etc/subgid")
    m = idmap.rootless_map("alice", 1000, 1001, subuid, subgid)
    assert m.ids.uid_map() == "0 1000 1\n1 100000 65536\n65537 300000 1000\n"
    assert m.ids.gid_map() == "0 1001 1\n1 200000 65536\n"
    assert m.ids.root == (1000, 1001) and m.ids.host_uid(65537) == 300000
    assert not (m.single_uid or m.single_gid) and m.note == ""
    assert m.describe() == ("user alice (uid 1000, gid 1001); subordinate uids 100000:65536 "
                            "(/etc/subuid:1), 300000:1000 (/etc/subuid:3); subordinate gids "
                            "200000:65536 (/etc/subgid:1)")


def test_without_subordinate_ids_only_the_users_own_id_and_a_note_of_what_breaks() -> None:
    m = idmap.rootless_map("nobody", 65534, 65534, (), ())
    assert m.ids == idmap.IDMap.single(65534, 1) and m.single_uid and m.single_gid
    assert "nobody has no subordinate uids and gids (/etc/subuid and /etc/subgid)" in m.note
    for what in ("images with files owned by other IDs", "chown to other users",
                 "setuid", "setgroups(2) is denied", "usermod --add-subuids"):
        assert what in m.note
    only_gids = idmap.rootless_map("a", 1000, 1000, idmap.parse_subids("a:5000:10", "u"), ())
    assert only_gids.ids.uid_map() == "0 1000 1\n1 5000 10\n" and only_gids.single_gid
    assert "no subordinate gids (/etc/subgid): only its own gid 1000" in only_gids.note
    only_uids = idmap.rootless_map("a", 1000, 1000, (), idmap.parse_subids("a:5000:10", "g"))
    assert only_uids.single_uid and "setgroups" not in only_uids.note


@pytest.mark.parametrize(("text", "why"), [
    ("a:100:10\na:105:10\n", r"subordinate uids of a overlap: 100:10 \(f:1\) and 105:10 \(f:2\)"),
    ("a:900:200\n", r"a's own uid 1000 is in its subordinate range 900:200 \(f:1\)"),
    ("".join(f"a:{10 * i + 2000}:1\n" for i in range(340)), "340 subordinate uid ranges"),
])
def test_maps_the_kernel_would_refuse_are_refused_naming_the_lines(text: str, why: str) -> None:
    with pytest.raises(idmap.IDMapError, match=why):
        idmap.rootless_map("a", 1000, 1000, idmap.parse_subids(text, "f"), ())


def test_user_map_reads_the_files_and_the_password_database(tmp_path: Path) -> None:
    (tmp_path / "subuid").write_text("root:100000:65536\n")
    (tmp_path / "subgid").write_text("0:100000:65536\n")
    m = idmap.user_map(0, subuid=str(tmp_path / "subuid"), subgid=str(tmp_path / "subgid"))
    assert (m.user, m.uid, m.gid) == ("root", 0, 0)
    assert m.ids.uid_map() == m.ids.gid_map() == "0 0 1\n1 100000 65536\n"
    nameless = idmap.user_map(2**31 + 7, subuid=str(tmp_path / "none"),
                              subgid=str(tmp_path / "none"))
    assert (nameless.user, nameless.gid) == (str(2**31 + 7), 2**31 + 7) and nameless.note


_ranges = st.lists(st.tuples(st.integers(1, 2**20), st.integers(1, 2**16)), max_size=8)


@given(_ranges, st.integers(0, 2**21))
def test_the_map_is_the_users_id_then_contiguous_container_ids(
        ranges: list[tuple[int, int]], own: int) -> None:
    """Non-overlapping ranges give container IDs 0, 1, 1+count1... with the host IDs of the
    lines in order; any overlap (or the user's ID inside a range) is refused."""
    text = "".join(f"u:{start}:{count}\n" for start, count in ranges)
    lines = idmap.parse_subids(text, "f")
    spans = sorted((s, s + c) for s, c in ranges)
    clash = any(b[0] < a[1] for a, b in itertools.pairwise(spans)) or any(
        s <= own < e for s, e in spans)
    if clash:
        with pytest.raises(idmap.IDMapError):
            idmap.rootless_map("u", own, own, lines, lines)
        return
    m = idmap.rootless_map("u", own, own, lines, lines)
    assert m.ids.uids[0] == R(container_id=0, host_id=own, size=1)
    assert [(r.host_id, r.size) for r in m.ids.uids[1:]] == ranges
    nxt = 1
    for r in m.ids.uids[1:]:
        assert r.container_id == nxt
        nxt += r.size
    assert m.ids.uids == m.ids.gids and m.single_uid == (not ranges) == bool(m.note)


@given(st.lists(st.tuples(st.sampled_from(["alice", "1000", "bob", "#x", ""]),
                          st.integers(0, 2**31), st.integers(1, 2**16)), max_size=10))
def test_parse_reads_back_what_a_file_holds(rows: list[tuple[str, int, int]]) -> None:
    text = "".join(f"{o}:{s}:{c}\n" if o else "\n" for o, s, c in rows)
    got = idmap.parse_subids(text, "f")
    want = [(o, s, c) for o, s, c in rows if o and not o.startswith("#")]
    assert [(g.owner, g.start, g.count) for g in got] == want
