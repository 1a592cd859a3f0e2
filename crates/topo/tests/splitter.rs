//! `[[splitter]]` entries: a good pair compiles into two striping relays
//! with a logical VC each way per PVC through them, and every mistake is
//! reported with the line of the entry or PVC it is in.

/// A pair of relays with `n` stripe links (the first `links` of them
/// present), a PVC through them along `path`, and the entry's extra
/// `fields`.
fn network(n: u32, links: u32, path: &str, fields: &str) -> String {
    let mut t = String::from(
        "[[host]]\nname = \"a\"\n[[host]]\nname = \"b\"\n\
         [[switch]]\nname = \"sw\"\nports = 2\n\
         [[link]]\na = \"a\"\nb = \"sw:0\"\n\
         [[link]]\na = \"sw:1\"\nb = \"r1:0\"\n\
         [[link]]\na = \"r2:0\"\nb = \"b\"\n",
    );
    for i in 1..=links {
        t += &format!("[[link]]\na = \"r1:{i}\"\nb = \"r2:{i}\"\ndelay = \"{i}00us\"\n");
    }
    t += &format!("[[pvc]]\nname = \"p\"\npath = {path}\n");
    t += &format!(
        "[[splitter]]\nname = \"s\"\nrelays = [\"r1\", \"r2\"]\nstripes = {n}\n{fields}\n"
    );
    t
}

const PATH: &str = "[\"a\", \"sw\", \"r1\", \"r2\", \"b\"]";

#[test]
fn a_good_pair_compiles_into_two_relays_striping_each_way() {
    let bp = aurora_topo::compile(&network(4, 4, PATH, "unit = \"pdu\"\nsync = \"sequence\""))
        .unwrap_or_else(|p| panic!("{p}"));
    let names: Vec<&str> = bp.stripes.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["s/p", "s/p back"]);
    let fwd = &bp.stripes[0];
    assert_eq!((fwd.from.as_str(), fwd.to.as_str()), ("r1", "r2"));
    let via = fwd.via.as_ref().unwrap();
    assert_eq!(via.ports, [1, 2, 3, 4]);
    assert!(bp.switches.iter().any(|(n, _, p)| n == "r1" && *p == 5));
}

#[test]
fn every_mistake_is_reported_at_its_entry() {
    let cases = [
        (4, 4, PATH, "unit = \"atm\"", "splitter \"s\": unit \"atm\" is not cell, pdu or ip"),
        (
            4,
            4,
            PATH,
            "sync = \"sequence\"",
            "splitter \"s\": a relay carries whole 48-byte cells",
        ),
        (4, 4, PATH, "quantum = 0", "splitter \"s\": quantum 0 is outside 1 to 16777216"),
        (0, 0, PATH, "", "splitter \"s\": stripes 0 is outside 1 to 254"),
        (4, 3, PATH, "", "splitter \"s\": no link joins \"r1:4\" and \"r2:4\" (stripe 4)"),
        (
            4,
            4,
            PATH,
            "timeout = \"50us\"",
            "splitter \"s\": with marker sync the timeout must be longer than the idle-marker delay",
        ),
        (4, 4, PATH, "unit = \"ip\"\nsdu = 10", "splitter \"s\": sdu 10 is outside 28 to 65535"),
    ];
    for (n, links, path, fields, want) in cases {
        let text = network(n, links, path, fields);
        let line = text.lines().position(|l| l == "[[splitter]]").unwrap() + 1;
        let p = aurora_topo::compile(&text)
            .err()
            .unwrap_or_else(|| panic!("accepted: {fields}"));
        assert!(
            p.0.iter()
                .any(|x| x.line == line && x.msg.starts_with(want)),
            "{fields}: wanted \"{want}\" at line {line}, got:\n{p}"
        );
    }
    // Two names for the relays, or the same relay twice.
    let text = network(2, 2, PATH, "").replace("relays = [\"r1\", \"r2\"]", "relays = [\"r1\"]");
    let p = aurora_topo::compile(&text).err().unwrap();
    assert!(p.to_string().contains("relays names 1 nodes"), "{p}");
}
