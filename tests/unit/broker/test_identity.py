"""The broker's identity files: round trips, the `.bak` copy, malformed files, another set's file."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokergroup.broker.identity import Identity, IdentityError, IdentityFiles, check_matches

FINAL = Identity("cluster-a", "broker-a", 2)
TEMP = Identity("cluster-a", "broker-a", 3, "127.0.0.1:10911;1700000000000")


def test_a_new_directory_has_no_identity(tmp_path: Path) -> None:
    files = IdentityFiles(tmp_path / "data" / "broker")
    assert (files.load(), files.load_temp()) == (None, None)
    assert files.final.parent.is_dir()


def test_final_identity_round_trips(tmp_path: Path) -> None:
    IdentityFiles(tmp_path).save_final(FINAL)
    assert IdentityFiles(tmp_path).load() == FINAL
    assert (tmp_path / "brokerIdentity").read_text(encoding="utf-8") == "cluster-a#broker-a#2"


def test_temp_identity_round_trips_with_its_check_code(tmp_path: Path) -> None:
    IdentityFiles(tmp_path).save_temp(TEMP)
    assert IdentityFiles(tmp_path).load_temp() == TEMP
    assert IdentityFiles(tmp_path).load() is None
    assert (tmp_path / "brokerIdentity-temp").read_text(encoding="utf-8") == (
        "cluster-a#broker-a#3#127.0.0.1:10911;1700000000000"
    )


@pytest.mark.parametrize("identity", [Identity("c", "b", 1), Identity("Default.Cluster", "x_y-z%|1", 2**40)])
def test_names_allowed_by_the_settings_round_trip(tmp_path: Path, identity: Identity) -> None:
    files = IdentityFiles(tmp_path)
    files.save_final(identity)
    assert files.load() == identity


def test_saving_the_final_identity_drops_the_temp_file(tmp_path: Path) -> None:
    files = IdentityFiles(tmp_path)
    files.save_temp(TEMP)
    files.save_final(Identity(TEMP.cluster_name, TEMP.broker_name, TEMP.broker_id))
    assert not files.temp.exists()
    assert files.load_temp() is None
    assert files.load() == Identity("cluster-a", "broker-a", 3)


def test_drop_temp_is_idempotent(tmp_path: Path) -> None:
    files = IdentityFiles(tmp_path)
    files.drop_temp()
    files.save_temp(TEMP)
    files.drop_temp()
    files.drop_temp()
    assert files.load_temp() is None


def test_overwriting_keeps_the_previous_content_as_bak(tmp_path: Path) -> None:
    files = IdentityFiles(tmp_path)
    files.save_final(FINAL)
    assert not (tmp_path / "brokerIdentity.bak").exists()
    files.save_final(Identity("cluster-a", "broker-a", 5))
    assert (tmp_path / "brokerIdentity.bak").read_text(encoding="utf-8") == "cluster-a#broker-a#2"
    assert files.load() == Identity("cluster-a", "broker-a", 5)
    files.save_final(Identity("cluster-a", "broker-a", 6))
    assert (tmp_path / "brokerIdentity.bak").read_text(encoding="utf-8") == "cluster-a#broker-a#5"


def test_overwriting_the_temp_file_keeps_a_bak_too(tmp_path: Path) -> None:
    files = IdentityFiles(tmp_path)
    files.save_temp(TEMP)
    files.save_temp(Identity("cluster-a", "broker-a", 4, "127.0.0.1:10911;1700000000001"))
    bak = tmp_path / "brokerIdentity-temp.bak"
    assert bak.read_text(encoding="utf-8") == "cluster-a#broker-a#3#127.0.0.1:10911;1700000000000"
    assert files.load_temp() == Identity("cluster-a", "broker-a", 4, "127.0.0.1:10911;1700000000001")


def test_writes_leave_no_tmp_file_behind(tmp_path: Path) -> None:
    files = IdentityFiles(tmp_path)
    files.save_temp(TEMP)
    files.save_final(FINAL)
    files.save_final(FINAL)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["brokerIdentity", "brokerIdentity.bak"]


def test_a_trailing_newline_is_tolerated(tmp_path: Path) -> None:
    """A file edited by hand usually ends with a newline."""
    (tmp_path / "brokerIdentity").write_text("cluster-a#broker-a#2\n", encoding="utf-8")
    assert IdentityFiles(tmp_path).load() == FINAL


@pytest.mark.parametrize(
    ("temp", "text", "names"),
    [
        (False, "", ("cluster#broker#id",)),
        (False, "cluster-a#broker-a", ("cluster#broker#id",)),
        (False, "cluster-a#broker-a#2#extra", ("cluster#broker#id",)),
        (False, "cluster-a#broker-a#two", ("broker id", "'two'", "not a number")),
        (False, "cluster-a#broker-a#", ("broker id", "not a number")),
        (False, "cluster-a#broker-a#2.0", ("broker id", "'2.0'")),
        (True, "", ("cluster#broker#id#checkcode",)),
        (True, "cluster-a#broker-a#3", ("cluster#broker#id#checkcode",)),
        (True, "cluster-a#broker-a#3#code#more", ("cluster#broker#id#checkcode",)),
        (True, "cluster-a#broker-a#x#127.0.0.1:1;1", ("broker id", "'x'")),
    ],
)
def test_a_malformed_file_names_its_path(tmp_path: Path, temp: bool, text: str, names: tuple[str, ...]) -> None:
    files = IdentityFiles(tmp_path)
    path, load = (files.temp, files.load_temp) if temp else (files.final, files.load)
    path.write_text(text, encoding="utf-8")
    with pytest.raises(IdentityError) as caught:
        load()
    assert str(path) in str(caught.value)
    for name in names:
        assert name in str(caught.value)


def test_a_binary_identity_file_names_its_path(tmp_path: Path) -> None:
    files = IdentityFiles(tmp_path)
    files.final.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(IdentityError, match=str(files.final)):
        files.load()


def test_check_matches_accepts_its_own_set(tmp_path: Path) -> None:
    check_matches(FINAL, cluster_name="cluster-a", broker_name="broker-a", path=tmp_path / "brokerIdentity")


@pytest.mark.parametrize(
    ("cluster", "broker"),
    [("cluster-a", "broker-b"), ("cluster-b", "broker-a"), ("cluster-b", "broker-b"), ("cluster-a", "Broker-a")],
)
def test_check_matches_refuses_another_sets_file(tmp_path: Path, cluster: str, broker: str) -> None:
    IdentityFiles(tmp_path).save_final(FINAL)
    files = IdentityFiles(tmp_path)
    loaded = files.load()
    assert loaded is not None
    with pytest.raises(IdentityError) as caught:
        check_matches(loaded, cluster_name=cluster, broker_name=broker, path=files.final)
    remark = str(caught.value)
    assert str(files.final) in remark
    assert "belongs to cluster-a/broker-a" in remark
    assert f"configured as {cluster}/{broker}" in remark
    assert "refusing to start" in remark


def test_check_matches_refuses_another_sets_temp_file(tmp_path: Path) -> None:
    files = IdentityFiles(tmp_path)
    files.save_temp(TEMP)
    loaded = files.load_temp()
    assert loaded is not None
    with pytest.raises(IdentityError, match="belongs to cluster-a/broker-a"):
        check_matches(loaded, cluster_name="cluster-a", broker_name="broker-z", path=files.temp)


def test_dropping_the_temp_file_fsyncs_its_folder_after_the_unlink(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the folder's fsync the removed temp file can come back after a power loss."""
    import brokergroup.broker.identity as identity

    files = IdentityFiles(tmp_path)
    files.save_temp(TEMP)
    synced: list[tuple[Path, bool]] = []

    def record(path: Path, *, directory: bool = False) -> None:
        synced.append((path, files.temp.exists()))

    monkeypatch.setattr(identity, "fsync_path", record)
    files.save_final(FINAL)
    # the rename of the final file, then the unlink of the temp file: each followed by the folder's fsync
    assert synced == [(tmp_path, True), (tmp_path, False)]
