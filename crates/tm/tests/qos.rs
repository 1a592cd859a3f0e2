//! The QoS text parser on arbitrary and on nearly-valid text.

use aurora_tm::{Contract, Envelope, Qos, TrafficClass, MAX_PCR};
use proptest::prelude::*;

/// A rate as text in one of its spellings.
fn rate_text() -> impl Strategy<Value = String> {
    prop_oneof![
        (1u64..2_000_000).prop_map(|r| r.to_string()),
        (1u64..2_000).prop_map(|r| format!("{r}k")),
        (1u64..2_000).prop_map(|r| format!("{r}kcps")),
        (1u64..999).prop_map(|r| format!("{r}Mbps")),
        (1u64..99, 0u64..99).prop_map(|(a, b)| format!("{a}.{b}M")),
    ]
}

/// Mostly valid QoS text, of every class.
fn valid_ish() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("ubr".to_string()),
        rate_text().prop_map(|r| format!("ubr:pcr={r}")),
        (rate_text(), 0u64..20_000).prop_map(|(r, c)| format!("cbr:pcr={r},cdv={c}")),
        rate_text().prop_map(|r| format!("abr,aal5:max_pcr={r}")),
        (
            rate_text(),
            rate_text(),
            1u64..100_000,
            0u64..20_000,
            any::<bool>()
        )
            .prop_map(|(p, s, m, c, order)| if order {
                format!("vbr:pcr={p},scr={s},mbs={m},cdvt={c}")
            } else {
                format!("vbr,aal0: mbs={m} ,scr={s},max_pcr={p}")
            }),
    ]
}

/// Text built from the grammar's own pieces, valid or a little off.
fn noisy() -> impl Strategy<Value = String> {
    let class = prop_oneof![
        Just("ubr"),
        Just("cbr"),
        Just("vbr"),
        Just("abr"),
        Just("xbr"),
        Just(""),
        Just(" vbr ")
    ];
    let aal = prop_oneof![
        Just(""),
        Just(",aal5"),
        Just(",aal0"),
        Just(",aal34"),
        Just(",aal2"),
        Just(",")
    ];
    let name = prop_oneof![
        Just("pcr"),
        Just("min_pcr"),
        Just("max_pcr"),
        Just("scr"),
        Just("mbs"),
        Just("cdv"),
        Just("cdvt"),
        Just("max_sdu"),
        Just("sdu"),
        Just("")
    ];
    let value = (
        prop_oneof![
            "[0-9]{1,4}",
            "[0-9]{1,25}",
            "[0-9]{0,3}\\.[0-9]{0,11}",
            Just("".to_string()),
            Just("-1".to_string()),
            Just("max".to_string())
        ],
        prop_oneof![
            Just(""),
            Just("k"),
            Just("M"),
            Just("G"),
            Just("m"),
            Just("K"),
            Just("g"),
            Just("x")
        ],
        prop_oneof![Just(""), Just("cps"), Just("bps"), Just("Bps"), Just("ps")],
    )
        .prop_map(|(n, m, u)| format!("{n}{m}{u}"));
    let param = (
        name,
        prop_oneof![8 => Just("="), 1 => Just(""), 1 => Just("==")],
        value,
    )
        .prop_map(|(n, eq, v)| format!("{n}{eq}{v}"));
    (
        class,
        aal,
        prop::option::of(prop::collection::vec(param, 0..6)),
    )
        .prop_map(|(c, a, params)| match params {
            None => format!("{c}{a}"),
            Some(p) => format!("{c}{a}:{}", p.join(",")),
        })
}

/// Valid text, text a little off, and valid text with a byte changed.
fn qos_like() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => valid_ish(),
        3 => noisy(),
        2 => (valid_ish(), any::<prop::sample::Index>(), "[a-z0-9=:,. ]")
            .prop_map(|(t, i, c)| {
                let mut b: Vec<char> = t.chars().collect();
                let i = i.index(b.len());
                b[i] = c.chars().next().unwrap_or(' ');
                b.into_iter().collect()
            }),
    ]
}

fn check(text: &str) -> Result<(), TestCaseError> {
    match text.parse::<Qos>() {
        Ok(q) => {
            // What prints parses back to the same QoS.
            prop_assert_eq!(q.to_string().parse::<Qos>(), Ok(q));
            for r in [q.pcr, q.min_pcr, q.max_pcr, q.scr].into_iter().flatten() {
                prop_assert!((1..=MAX_PCR).contains(&r));
            }
            if let (Some(s), Some(p)) = (q.scr, q.pace()) {
                prop_assert!(s <= p);
            }
            if q.class != TrafficClass::Vbr {
                prop_assert!(q.scr.is_none() && q.mbs.is_none());
            }
        }
        Err(e) => {
            // One sentence naming the text.
            prop_assert!(e.0.contains(text.trim()), "{:?}: {}", text, e);
            prop_assert!(!e.0.is_empty());
        }
    }
    match text.parse::<Contract>() {
        Ok(c) => {
            let q: Qos = text.parse().unwrap();
            prop_assert_eq!(Contract::from_qos(&q), Ok(c));
            prop_assert_eq!(c.to_string().parse::<Contract>(), Ok(c));
            match c.envelope() {
                Envelope::Unlimited => prop_assert!(q.pace().is_none()),
                Envelope::Peak { pcr, .. } => prop_assert_eq!(Some(pcr), q.pace()),
                Envelope::Sustained { pcr, scr, mbs, .. } => {
                    prop_assert_eq!(q.class, TrafficClass::Vbr);
                    prop_assert_eq!(
                        (Some(pcr), Some(scr), Some(u64::from(mbs))),
                        (q.pace(), q.scr, q.mbs)
                    );
                }
            }
        }
        Err(e) => prop_assert!(e.0.contains(text.trim()), "{:?}: {}", text, e),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    /// Any text at all: no panic, and an error names the text.
    #[test]
    fn arbitrary_text(text in any::<String>()) {
        check(&text)?;
    }

    /// Text from the grammar's pieces reaches every branch.
    #[test]
    fn nearly_valid_text(text in qos_like()) {
        check(&text)?;
    }

    /// Bytes of the grammar's alphabet in any order.
    #[test]
    fn grammar_alphabet_soup(text in "[a-z0-9_=:,. kKMGmg]{0,40}") {
        check(&text)?;
    }
}

/// The grammar generator does produce valid contracts of every kind
/// (else the properties above would be checking only errors).
#[test]
fn the_generator_reaches_valid_text() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let (mut peak, mut sustained, mut unlimited, mut errors) = (0, 0, 0, 0);
    for _ in 0..20_000 {
        let text = qos_like().new_tree(&mut runner).unwrap().current();
        match text.parse::<Contract>().map(|c| c.envelope()) {
            Ok(Envelope::Peak { .. }) => peak += 1,
            Ok(Envelope::Sustained { .. }) => sustained += 1,
            Ok(Envelope::Unlimited) => unlimited += 1,
            Err(_) => errors += 1,
        }
    }
    eprintln!("peak {peak}, sustained {sustained}, unlimited {unlimited}, errors {errors}");
    assert!(
        peak > 1_000 && sustained > 500 && unlimited > 1_000 && errors > 1_000,
        "{peak} {sustained} {unlimited} {errors}"
    );
}
