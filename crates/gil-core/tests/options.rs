//! The options grammar against random text: it never panics, it accepts
//! exactly the grammar (an independent reading of it, below), what it
//! accepts reads back as the same value, documented forms set what they
//! say, and the text a host's lock prints builds that lock on every host.

use gil_core::options::{expand_trace_path, Key};
use gil_core::{GilConfig, Host, Options, Policy, MAX_LAPS, MAX_SPIN_US, MAX_SWITCH_INTERVAL_US, PRESETS};
use proptest::prelude::*;

/// The grammar read a second way, from the module's table: whether `text`
/// is a valid text.
fn oracle(text: &str) -> bool {
    let mut parts = text.split(',');
    let preset = parts.next().unwrap_or("");
    if !PRESETS.contains(&preset) {
        return false;
    }
    let lazy = preset.contains("lazy");
    let bounds = preset.contains("priority") || preset.contains("monitor");
    let mut seen: Vec<&str> = Vec::new();
    let mut trace = false;
    let mut ring = false;
    let num = |v: &str, lo: u64, hi: u64| {
        !v.is_empty() && v.bytes().all(|c| c.is_ascii_digit()) && v.parse::<u64>().is_ok_and(|n| n >= lo && n <= hi)
    };
    for part in parts {
        let Some((key, value)) = part.split_once('=') else {
            return false;
        };
        if seen.contains(&key) {
            return false;
        }
        seen.push(key);
        let ok = match key {
            "interval_us" => num(value, 0, MAX_SWITCH_INTERVAL_US),
            "lazy_us" => lazy && num(value, 1, MAX_SWITCH_INTERVAL_US),
            "spin_us" => num(value, 0, MAX_SPIN_US),
            "laps" => bounds && num(value, 0, u64::from(MAX_LAPS)),
            "stats" => value == "0" || value == "1",
            "trace" => {
                trace = true;
                let lower = value.to_ascii_lowercase();
                let ext = (lower.ends_with(".json") && value.len() > 5) || (lower.ends_with(".svg") && value.len() > 4);
                let percents = value.replace("%%", "").replace("%p", "");
                ext && value.len() <= 991 && !percents.contains('%') && !value.contains('\0')
            }
            "trace_ring" => {
                ring = true;
                num(value, 1, 1 << 32)
            }
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    !ring || trace
}

/// Texts near the grammar: a preset (or not), then options whose comma,
/// key, `=` and value are each right most of the time.
fn near() -> impl Strategy<Value = String> {
    let head = prop_oneof![
        4 => prop::sample::select(PRESETS.to_vec()).prop_map(str::to_owned),
        1 => "[a-z-]{0,8}",
    ];
    let key = prop_oneof![
        6 => prop::sample::select(Key::ALL.iter().map(|k| k.name()).collect::<Vec<_>>()).prop_map(str::to_owned),
        1 => prop::sample::select(vec!["lap", "", "Stats", "trace_", "interval"]).prop_map(str::to_owned),
    ];
    let value = prop_oneof![
        6 => prop::sample::select(vec![
            "0", "1", "2", "3", "16", "17", "50", "10000", "10001", "3600000000", "3600000001",
            "4294967296", "4294967297", "99999999999999999999999", "+1", "-1", " 1", "", "t.svg",
            "t-%p.JSON", "%%.json", "%d.svg", "t.txt", ".svg", "x", "a=b.svg",
        ])
        .prop_map(str::to_owned),
        1 => "[a-z_%.0-9]{0,6}",
    ];
    let sep = prop_oneof![12 => Just(","), 1 => Just(",,"), 1 => Just("")];
    let eq = prop_oneof![12 => Just("="), 1 => Just(""), 1 => Just("==")];
    let option = (sep, key, eq, value).prop_map(|(s, k, e, v)| format!("{s}{k}{e}{v}"));
    (
        head,
        prop::collection::vec(option, 0..5),
        prop_oneof![12 => Just(""), 1 => Just(",")],
    )
        .prop_map(|(h, options, tail)| format!("{h}{}{tail}", options.concat()))
}

/// A valid text, with what it must set.
#[derive(Debug, Clone)]
struct Valid {
    text: String,
    preset: &'static str,
    interval: Option<u64>,
    lazy: Option<u64>,
    spin: Option<u64>,
    laps: Option<u32>,
    stats: Option<bool>,
    trace: Option<(String, Option<u64>)>,
}

fn valid() -> impl Strategy<Value = Valid> {
    (
        prop::sample::select(PRESETS.to_vec()),
        prop::option::of(0..=MAX_SWITCH_INTERVAL_US),
        prop::option::of(1..=MAX_SWITCH_INTERVAL_US),
        prop::option::of(0..=MAX_SPIN_US),
        prop::option::of(0..=MAX_LAPS),
        prop::option::of(any::<bool>()),
        prop::option::of((
            "[a-z%]{0,3}(%p)?[a-z]{1,4}(\\.svg|\\.json|\\.SVG)",
            prop::option::of(1u64..=1 << 32),
        )),
    )
        .prop_filter("no stray %", |(_, _, _, _, _, _, t)| {
            t.as_ref()
                .is_none_or(|(p, _)| !p.replace("%%", "").replace("%p", "").contains('%'))
        })
        .prop_map(|(preset, interval, lazy, spin, laps, stats, trace)| {
            let lazy = lazy.filter(|_| preset.contains("lazy"));
            let laps = laps.filter(|_| preset != "classic" && preset != "lazy");
            let mut text = preset.to_owned();
            let mut add = |k: &str, v: Option<String>| {
                if let Some(v) = v {
                    text += &format!(",{k}={v}");
                }
            };
            add("interval_us", interval.map(|v| v.to_string()));
            add("lazy_us", lazy.map(|v| v.to_string()));
            add("spin_us", spin.map(|v| v.to_string()));
            add("laps", laps.map(|v| v.to_string()));
            add("stats", stats.map(|v| u8::from(v).to_string()));
            add("trace", trace.as_ref().map(|(p, _)| p.clone()));
            add("trace_ring", trace.as_ref().and_then(|(_, r)| r.map(|r| r.to_string())));
            Valid {
                text,
                preset,
                interval,
                lazy,
                spin,
                laps,
                stats,
                trace,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn random_bytes_never_panic_and_what_parses_reads_back(bytes in prop::collection::vec(any::<u8>(), 0..40)) {
        if let Ok(o) = Options::parse(&bytes) {
            prop_assert_eq!(o.to_string().parse::<Options>().unwrap(), o);
        }
    }

    #[test]
    fn accepts_exactly_the_grammar(text in near()) {
        let parsed = text.parse::<Options>();
        prop_assert_eq!(parsed.is_ok(), oracle(&text), "{:?}: {:?}", text, parsed);
        if let Ok(o) = parsed {
            prop_assert_eq!(o.to_string().parse::<Options>().unwrap(), o);
        }
    }

    #[test]
    fn documented_forms_set_what_they_say(v in valid()) {
        let o = v.text.parse::<Options>().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let base = GilConfig::preset(v.preset).unwrap().settings();
        let s = o.settings();
        prop_assert_eq!(o.preset(), v.preset);
        prop_assert_eq!(s.switch_interval_us, v.interval.unwrap_or(base.switch_interval_us));
        prop_assert_eq!(s.lazy_release_us, v.lazy.or(base.lazy_release_us));
        prop_assert_eq!(s.spin_us, v.spin.unwrap_or(0));
        prop_assert_eq!(s.laps, v.laps.unwrap_or(0));
        prop_assert_eq!(s.policy == Policy::Priority, v.preset.contains("priority"));
        prop_assert_eq!(o.stats(), v.stats.unwrap_or(false));
        prop_assert_eq!(o.given(Key::Stats), v.stats.is_some());
        prop_assert_eq!(o.trace(), v.trace.as_ref().map(|(p, _)| p.as_str()));
        prop_assert_eq!(o.trace_ring(), v.trace.as_ref().and_then(|(_, r)| *r));
        prop_assert_eq!(o.config().settings(), s);
        // The text reads back as the same value, and the settings alone too.
        prop_assert_eq!(o.to_string().parse::<Options>().unwrap(), o.clone());
        if let Some(from) = Options::from_settings(s) {
            prop_assert_eq!(from.to_string().parse::<Options>().unwrap().settings(), s);
        } else {
            prop_assert!(false, "{} has no text", v.text);
        }
        if let Some(t) = o.trace() {
            let path = expand_trace_path(t, 4242).unwrap();
            prop_assert_eq!(path.contains("4242"), t.replace("%%", "").contains("%p"));
        }
    }

    #[test]
    fn the_printed_text_builds_the_same_lock_on_every_host(v in valid(), from in 0..Host::ALL.len()) {
        let from = Host::ALL[from];
        let o = Options::parse_for(from, v.text.as_bytes()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let printed = Options::from_settings(o.settings()).map(|p| p.to_string());
        let printed = printed.ok_or_else(|| TestCaseError::fail(format!("{} on {from} prints nothing", v.text)))?;
        for &on in Host::ALL {
            let again = Options::parse_for(on, printed.as_bytes()).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(again.settings(), o.settings(), "{} on {} prints '{}'; on {}", v.text, from, printed, on);
        }
    }
}
