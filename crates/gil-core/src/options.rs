//! A lock's configuration as one line of text, the same for every host:
//! CPython's `-X rust_gil` and `PYTHON_RUST_GIL`, MicroPython's
//! `MICROPY_RUST_GIL`, OCaml's `OCAML_RUST_GIL`, Ruby's `RUBY_RUST_GIL`,
//! the C ABI's `gil_config_parse` and `gil_config_parse_host`.
//!
//! ```text
//! TEXT   = PRESET *( "," OPTION )
//! OPTION = KEY "=" VALUE                 each KEY at most once
//! ```
//!
//! `PRESET` is one of [`PRESETS`]. The keys, in the order [`Options`]
//! writes them:
//!
//! | key           | value                                                  |
//! |---------------|--------------------------------------------------------|
//! | `interval_us` | the switch interval, 0 to [`MAX_SWITCH_INTERVAL_US`](crate::MAX_SWITCH_INTERVAL_US) µs (0 behaves as 1) |
//! | `lazy_us`     | the lazy-release threshold, 1 µs to one hour; lazy presets only |
//! | `spin_us`     | the spin limit, 0 to [`MAX_SPIN_US`](crate::MAX_SPIN_US) µs                |
//! | `laps`        | the bound on laps, 0 to [`MAX_LAPS`](crate::MAX_LAPS); priority or monitor presets only (not `classic`, `lazy`) |
//! | `stats`       | `1`: per-thread accounting from the start, `0`: off    |
//! | `trace`       | a trace file: `NAME.json` (Chrome trace events) or `NAME.svg`, `%p` for the process id, `%%` for `%` |
//! | `trace_ring`  | keep only the last 1 to 2^32 events (needs `trace`)   |
//!
//! A host parses with [`Options::parse_for`]: a preset's name then stands
//! for that host's default for it ([`Host::preset_options`], e.g. OCaml's
//! `priority` spins 200 µs), and each option given wins over it. What a
//! lock's settings are is written back by [`Options::from_settings`], with
//! every value a host's default would change spelled out, so the text
//! printed anywhere builds the same lock everywhere.
//!
//! Strict on purpose: no spaces, no signs, no empty option (`,,` or a
//! trailing `,`), no unknown key and no key twice, so a typo is an error
//! and never leaves a default silently in force. Values in error messages
//! are shown escaped (`\xNN` for a byte that is not printable ASCII), so a
//! message shows what the text really holds.
//!
//! ```
//! use gil_core::{Options, Policy};
//! let o: Options = "priority-lazy,lazy_us=30,laps=3".parse()?;
//! assert_eq!(o.settings().policy, Policy::Priority);
//! assert_eq!(o.settings().lazy_release_us, Some(30));
//! assert_eq!(o.to_string(), "priority-lazy,lazy_us=30,laps=3");
//! let e = "priority,laps=99".parse::<Options>().unwrap_err();
//! assert_eq!(e.to_string(), "'priority,laps=99': laps must be a number from 0 to 16, not '99'");
//! # Ok::<(), gil_core::OptionsError>(())
//! ```

use std::fmt;
use std::str::FromStr;

use crate::escape::shown;
pub use crate::Key;
use crate::{GilConfig, Host, Settings, NUMBER_SETTINGS, PRESETS};

/// The longest `trace` file name accepted, in bytes: room for `%p` to grow
/// into a process id within the C ABI's `GIL_TRACE_PATH_MAX` (1024).
pub const MAX_TRACE_PATH: usize = 991;

/// The most events `trace_ring` may keep: 2^32.
pub const MAX_TRACE_RING: u64 = 1 << 32;

/// The text parsed: a preset, what the options set on top of it, and the
/// observers asked for. Built by [`Options::parse`] (or `str::parse`), or
/// from [`Settings`] by [`Options::from_settings`]; written back by
/// `Display`, which [`Options::parse`] reads as the same value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    preset: &'static str,
    settings: Settings,
    stats: bool,
    trace: Option<String>,
    trace_ring: Option<u64>,
    given: u32,
}

impl Options {
    /// Parses `text` (see the [module](self) for the grammar). Bytes, not a
    /// `str`: hosts read it from the environment or a command line, where it
    /// may be anything; only a `trace` file name may hold non-ASCII, and it
    /// must be UTF-8.
    ///
    /// # Errors
    /// An [`OptionsError`] naming the text and what is wrong in it.
    pub fn parse(text: &[u8]) -> Result<Options, OptionsError> {
        Options::parse_with(text, Host::Generic, true)
    }

    /// [`parse`](Self::parse) on `host`: the preset named stands for the
    /// host's default for it ([`Host::preset_options`]), and each option
    /// the text gives wins over that default. [`given`](Self::given) says
    /// what the text gave, not the host's default.
    ///
    /// # Errors
    /// As [`parse`](Self::parse).
    pub fn parse_for(host: Host, text: &[u8]) -> Result<Options, OptionsError> {
        Options::parse_with(text, host, true)
    }

    /// [`parse_for`](Self::parse_for) for a host that starts no observers
    /// (see [`parse_without_observers`](Self::parse_without_observers)).
    ///
    /// # Errors
    /// As [`parse`](Self::parse).
    pub fn parse_for_without_observers(host: Host, text: &[u8]) -> Result<Options, OptionsError> {
        Options::parse_with(text, host, false)
    }

    /// [`parse`](Self::parse) for a host that starts no observers: `stats`,
    /// `trace` and `trace_ring` are refused
    /// ([`OptionsErrorKind::ObserverNotTaken`]) rather than ignored.
    ///
    /// # Errors
    /// As [`parse`](Self::parse).
    pub fn parse_without_observers(text: &[u8]) -> Result<Options, OptionsError> {
        Options::parse_with(text, Host::Generic, false)
    }

    fn parse_with(text: &[u8], host: Host, observers: bool) -> Result<Options, OptionsError> {
        parse(text, host, observers).map_err(|kind| OptionsError {
            text: shown(text, 256),
            kind,
        })
    }

    /// The options a live lock's (or a configuration's) settings are, the
    /// text every report prints: the preset they are, then as an option
    /// every value that differs from the library's preset, and every value
    /// some host's default sets for that preset ([`Host::preset_options`])
    /// even where it does not differ, so that the text builds the same lock
    /// on every host (`priority,spin_us=0` is the library's `priority`:
    /// on CPython `priority` alone spins). No observers. `None` if no text
    /// says them: a combination no preset names (see [`Settings::preset`]),
    /// or a value the grammar refuses (`laps` on `classic`, a lazy
    /// threshold of 0).
    pub fn from_settings(settings: Settings) -> Option<Options> {
        let preset = settings.preset()?;
        let base = GilConfig::preset(preset).ok()?.settings();
        let tuned = host_tuned_keys(preset);
        let spelled = |key: Key, differs: bool| differs || tuned & key.bit() != 0;
        let mut text = preset.to_owned();
        for setting in NUMBER_SETTINGS {
            let value = setting.get(&settings);
            if spelled(setting.key, value != setting.get(&base)) {
                text += &format!(",{}={}", setting.key, value?);
            }
        }
        Options::parse(text.as_bytes()).ok().filter(|o| o.settings == settings)
    }

    /// The preset named, one of [`PRESETS`].
    pub fn preset(&self) -> &'static str {
        self.preset
    }

    /// The lock's settings: the preset's, with the options applied.
    pub fn settings(&self) -> Settings {
        self.settings
    }

    /// A configuration to build the lock from (no callback: the host adds
    /// its own).
    pub fn config(&self) -> GilConfig {
        GilConfig::with_settings(self.settings)
    }

    /// `stats=1`: per-thread accounting from the start.
    pub fn stats(&self) -> bool {
        self.stats
    }

    /// `trace=PATH`: the file name as given, `%p` and `%%` not yet replaced
    /// (see [`expand_trace_path`]).
    pub fn trace(&self) -> Option<&str> {
        self.trace.as_deref()
    }

    /// `trace_ring=N`: keep only the last N events.
    pub fn trace_ring(&self) -> Option<u64> {
        self.trace_ring
    }

    /// Whether the text gave `key`.
    pub fn given(&self, key: Key) -> bool {
        self.given & key.bit() != 0
    }

    /// The keys the text gave, as [`Key::bit`]s.
    pub fn given_mask(&self) -> u32 {
        self.given
    }
}

impl FromStr for Options {
    type Err = OptionsError;

    fn from_str(text: &str) -> Result<Options, OptionsError> {
        Options::parse(text.as_bytes())
    }
}

impl fmt::Display for Options {
    /// The preset, then each option the text gave, in [`Key::ALL`] order.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.preset)?;
        let s = &self.settings;
        for key in Key::ALL.into_iter().filter(|k| self.given(*k)) {
            write!(f, ",{key}=")?;
            match (key.setting(), key) {
                (Some(setting), _) => write!(f, "{}", setting.get(s).unwrap_or_default())?,
                (None, Key::Stats) => write!(f, "{}", u8::from(self.stats))?,
                (None, Key::Trace) => f.write_str(self.trace.as_deref().unwrap_or_default())?,
                (None, Key::TraceRing) => write!(f, "{}", self.trace_ring.unwrap_or_default())?,
                // Every key is a number setting or one of the observers above.
                (None, _) => {}
            }
        }
        Ok(())
    }
}

/// A text [`Options::parse`] refused: the text (escaped) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionsError {
    text: String,
    kind: OptionsErrorKind,
}

impl OptionsError {
    /// What is wrong.
    pub fn kind(&self) -> &OptionsErrorKind {
        &self.kind
    }
}

impl fmt::Display for OptionsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "'{}': {}", self.text, self.kind)
    }
}

impl std::error::Error for OptionsError {}

/// What is wrong in a text. Parts of the text it names are escaped for
/// display (see the [module](self)).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OptionsErrorKind {
    /// The text is empty.
    Empty,
    /// The text starts with `,`.
    NoPreset,
    /// Not one of [`PRESETS`].
    UnknownPreset(String),
    /// An empty option: `,,` (`trailing: false`) or a `,` at the end.
    EmptyOption {
        /// Whether it is a `,` at the end.
        trailing: bool,
    },
    /// An option without `=`.
    NotKeyValue(String),
    /// An option with nothing before its `=`.
    NoKey(String),
    /// A key the grammar does not have.
    UnknownKey(String),
    /// A key given twice.
    Twice(Key),
    /// A number setting's key on a preset that does not take it
    /// ([`NumberSetting::needs`](crate::NumberSetting::needs)): `lazy_us`
    /// without lazy release, `laps` on `classic`.
    NotTaken(Key),
    /// A value out of its key's range, or not a number.
    BadValue {
        /// The key.
        key: Key,
        /// The value given.
        value: String,
    },
    /// A `trace` file name the lock cannot write.
    BadTracePath {
        /// The name given.
        path: String,
        /// Why not.
        problem: TracePathProblem,
    },
    /// `trace_ring` without `trace`.
    TraceRingWithoutTrace,
    /// An observer key given to a host that starts no observers
    /// ([`Options::parse_without_observers`]).
    ObserverNotTaken(Key),
}

/// Why a `trace` file name is refused.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TracePathProblem {
    /// Empty, or longer than [`MAX_TRACE_PATH`] bytes.
    Length,
    /// A `%` not followed by `p` or `%`.
    Percent,
    /// Neither `.json` nor `.svg` at the end.
    Extension,
    /// Not UTF-8, or a NUL byte in it.
    Encoding,
}

fn known_presets() -> String {
    PRESETS.join(", ")
}

/// "keys: interval_us, ...", every key for messages, from [`Key::ALL`].
struct Keys;

impl fmt::Display for Keys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("keys:")?;
        for (i, key) in Key::ALL.iter().enumerate() {
            f.write_str(if i == 0 { " " } else { ", " })?;
            f.write_str(key.name())?;
        }
        Ok(())
    }
}

const KEYS: Keys = Keys;

impl fmt::Display for OptionsErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use OptionsErrorKind as E;
        match self {
            E::Empty => write!(f, "no GIL policy given (PRESET[,KEY=VALUE...], presets: {})", known_presets()),
            E::NoPreset => write!(f, "no GIL policy before ',' (known: {})", known_presets()),
            E::UnknownPreset(p) => write!(f, "unknown GIL policy '{p}' (known: {})", known_presets()),
            E::EmptyOption { trailing: true } => write!(f, "a trailing ',' (options are KEY=VALUE, {KEYS})"),
            E::EmptyOption { trailing: false } => write!(f, "an empty option ',,' (options are KEY=VALUE, {KEYS})"),
            E::NotKeyValue(o) => write!(f, "'{o}' is not KEY=VALUE ({KEYS})"),
            E::NoKey(o) => write!(f, "'{o}' has no key ({KEYS})"),
            E::UnknownKey(k) => write!(f, "unknown option '{k}' ({KEYS})"),
            E::Twice(k) => write!(f, "{k} is given twice"),
            E::NotTaken(key) => match key.setting().and_then(|s| s.needs) {
                Some(needs) => write!(f, "{key} needs {}", needs.what),
                None => write!(f, "{key} is not taken by this preset"),
            },
            E::BadValue { key, value } => match (key.setting(), key) {
                (Some(s), _) => write!(
                    f,
                    "{key} must be a number{} from {} to {}, not '{value}'",
                    if s.micros { " of microseconds" } else { "" },
                    s.min,
                    s.max
                ),
                (None, Key::Stats) => write!(f, "stats must be 0 or 1, not '{value}'"),
                (None, Key::TraceRing) => write!(
                    f,
                    "trace_ring must be a number of events from 1 to {MAX_TRACE_RING}, not '{value}'"
                ),
                (None, _) => write!(f, "trace file '{value}' is not a file name"),
            },
            E::BadTracePath { path, problem } => match problem {
                TracePathProblem::Length => write!(
                    f,
                    "trace needs a file name of 1 to {MAX_TRACE_PATH} bytes, not '{path}'"
                ),
                TracePathProblem::Percent => write!(
                    f,
                    "trace file '{path}': % must be followed by p (the process id) or % (a percent sign)"
                ),
                TracePathProblem::Extension => write!(
                    f,
                    "trace file '{path}' must end in .json (Chrome trace events, for Perfetto) or .svg (a timeline), after a file name"
                ),
                TracePathProblem::Encoding => {
                    write!(f, "trace file '{path}' must be UTF-8 without NUL bytes")
                }
            },
            E::TraceRingWithoutTrace => f.write_str("trace_ring needs trace=PATH"),
            E::ObserverNotTaken(k) => write!(f, "{k} asks for an observer, and this host starts none"),
        }
    }
}

/// A whole unsigned decimal number (digits only) no larger than `max`.
fn number(value: &[u8], max: u64) -> Option<u64> {
    if value.is_empty() {
        return None;
    }
    value.iter().try_fold(0u64, |v, &c| {
        let digit = u64::from(c.checked_sub(b'0').filter(|d| *d <= 9)?);
        v.checked_mul(10)?.checked_add(digit).filter(|v| *v <= max)
    })
}

/// A trace file's format, which its name says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TraceFormat {
    /// Chrome trace-event JSON (`NAME.json`).
    ChromeJson,
    /// An SVG timeline (`NAME.svg`).
    Svg,
}

impl TraceFormat {
    /// The format a trace file name asks for: its last component is a
    /// name followed by `.json` or `.svg` (any case); `None` for anything
    /// else, `.json` alone too (a hidden file without an extension). The
    /// options grammar, the trace writer and the C ABI all decide with this.
    pub fn from_name(name: &[u8]) -> Option<TraceFormat> {
        let is_separator = |c: &u8| *c == b'/' || (cfg!(windows) && *c == b'\\');
        let file = name.rsplit(is_separator).next().unwrap_or(name);
        let ends = |ext: &[u8]| file.len() > ext.len() && file[file.len() - ext.len()..].eq_ignore_ascii_case(ext);
        if ends(b".json") {
            Some(TraceFormat::ChromeJson)
        } else if ends(b".svg") {
            Some(TraceFormat::Svg)
        } else {
            None
        }
    }

    /// [`TraceFormat::from_name`] of a path.
    pub fn from_path(path: &std::path::Path) -> Option<TraceFormat> {
        TraceFormat::from_name(path.as_os_str().as_encoded_bytes())
    }
}

/// Checks a `trace` file name (see the [module](self)).
fn check_trace_path(path: &[u8]) -> Result<String, TracePathProblem> {
    if path.is_empty() || path.len() > MAX_TRACE_PATH {
        return Err(TracePathProblem::Length);
    }
    let mut i = 0;
    while i < path.len() {
        if path[i] == b'%' {
            if !matches!(path.get(i + 1), Some(b'p' | b'%')) {
                return Err(TracePathProblem::Percent);
            }
            i += 1;
        }
        i += 1;
    }
    if TraceFormat::from_name(path).is_none() {
        return Err(TracePathProblem::Extension);
    }
    match std::str::from_utf8(path) {
        Ok(s) if !s.contains('\0') => Ok(s.to_owned()),
        _ => Err(TracePathProblem::Encoding),
    }
}

/// A `trace` file name for process `pid`: `%p` replaced by the pid, `%%`
/// by `%`. `None` if `template` is not one [`Options::parse`] accepts.
pub fn expand_trace_path(template: &str, pid: u32) -> Option<String> {
    check_trace_path(template.as_bytes()).ok()?;
    let mut out = String::with_capacity(template.len() + 8);
    let mut chars = template.chars();
    while let Some(c) = chars.next() {
        if c == '%' {
            match chars.next() {
                Some('p') => out += &pid.to_string(),
                _ => out.push('%'),
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

/// The keys some host's default sets for `preset` ([`Key::bit`]s): the
/// values a text must spell out to mean the same lock on every host.
fn host_tuned_keys(preset: &str) -> u32 {
    let tuned = Host::ALL.iter().filter_map(|host| host.preset_options(preset));
    tuned
        .map(|text| {
            let defaults = parse(text.as_bytes(), Host::Generic, false);
            defaults.expect("a host's default parses").given_mask()
        })
        .fold(0, |mask, keys| mask | keys)
}

/// What `preset` is on `host`: the library's preset, or the host's
/// default for it (an options text of the library's grammar).
fn preset_settings(host: Host, preset: &'static str) -> Settings {
    let text = host.preset_options(preset).expect("a listed preset");
    if text == preset {
        GilConfig::preset(preset).expect("listed presets exist").settings()
    } else {
        let defaults = parse(text.as_bytes(), Host::Generic, false);
        defaults.expect("a host's default parses").settings
    }
}

fn parse(text: &[u8], host: Host, observers: bool) -> Result<Options, OptionsErrorKind> {
    use OptionsErrorKind as E;
    if text.is_empty() {
        return Err(E::Empty);
    }
    let mut parts = text.split(|&c| c == b',');
    let preset_text = parts.next().unwrap_or_default();
    if preset_text.is_empty() {
        return Err(E::NoPreset);
    }
    let preset = PRESETS
        .iter()
        .copied()
        .find(|p| p.as_bytes() == preset_text)
        .ok_or_else(|| E::UnknownPreset(shown(preset_text, 128)))?;
    let preset_config = preset_settings(host, preset);
    let mut config = preset_config;
    let mut o = Options {
        preset,
        settings: config,
        stats: false,
        trace: None,
        trace_ring: None,
        given: 0,
    };
    let mut parts = parts.peekable();
    while let Some(option) = parts.next() {
        if option.is_empty() {
            return Err(E::EmptyOption {
                trailing: parts.peek().is_none(),
            });
        }
        let Some(eq) = option.iter().position(|&c| c == b'=') else {
            return Err(E::NotKeyValue(shown(option, 128)));
        };
        let (name, value) = (&option[..eq], &option[eq + 1..]);
        if name.is_empty() {
            return Err(E::NoKey(shown(option, 128)));
        }
        let key = Key::from_name(name).ok_or_else(|| E::UnknownKey(shown(name, 128)))?;
        if o.given(key) {
            return Err(E::Twice(key));
        }
        if key.is_observer() && !observers {
            return Err(E::ObserverNotTaken(key));
        }
        o.given |= key.bit();
        let bad = || E::BadValue {
            key,
            value: shown(value, 128),
        };
        if let Some(setting) = key.setting() {
            // Checked on the preset's settings, not on what came before.
            if !setting.taken_by(&preset_config) {
                return Err(E::NotTaken(key));
            }
            let n = number(value, setting.max).filter(|n| *n >= setting.min);
            setting.set(&mut config, n.ok_or_else(bad)?);
            continue;
        }
        match key {
            Key::Stats => {
                o.stats = match value {
                    b"0" => false,
                    b"1" => true,
                    _ => return Err(bad()),
                }
            }
            Key::Trace => {
                o.trace = Some(check_trace_path(value).map_err(|problem| E::BadTracePath {
                    path: shown(value, 128),
                    problem,
                })?);
            }
            Key::TraceRing => {
                o.trace_ring = Some(number(value, MAX_TRACE_RING).filter(|n| *n > 0).ok_or_else(bad)?);
            }
            // Every other key sets a number (a test checks it).
            _ => return Err(E::UnknownKey(key.to_string())),
        }
    }
    if o.trace_ring.is_some() && o.trace.is_none() {
        return Err(E::TraceRingWithoutTrace);
    }
    o.settings = config;
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        text.parse::<Options>().unwrap_err().kind().to_string()
    }

    #[test]
    fn a_preset_alone_is_its_settings() {
        for preset in PRESETS {
            let o: Options = preset.parse().unwrap();
            assert_eq!(o.settings(), GilConfig::preset(preset).unwrap().settings());
            assert_eq!(o.given_mask(), 0);
            assert_eq!(o.to_string(), *preset);
        }
    }

    #[test]
    fn every_key_sets_what_it_names() {
        let o: Options =
            "priority-lazy,interval_us=0,lazy_us=30,spin_us=20,laps=3,stats=1,trace=t-%p-%%.JSON,trace_ring=9"
                .parse()
                .unwrap();
        let s = o.settings();
        assert_eq!(
            (s.switch_interval_us, s.lazy_release_us, s.spin_us, s.laps),
            (0, Some(30), 20, 3)
        );
        assert!(o.stats());
        assert_eq!(o.trace(), Some("t-%p-%%.JSON"));
        assert_eq!(o.trace_ring(), Some(9));
        assert_eq!(o.given_mask(), 0x7f);
        assert_eq!(expand_trace_path(o.trace().unwrap(), 42).unwrap(), "t-42-%.JSON");
        let c = o.config().settings();
        assert_eq!(c, s);
    }

    #[test]
    fn errors_name_what_is_wrong() {
        assert!(err("").starts_with("no GIL policy given"));
        assert!(err(",laps=1").starts_with("no GIL policy before ','"));
        assert!(err("fast").starts_with("unknown GIL policy 'fast' (known: classic, priority,"));
        assert!(err("priority,").starts_with("a trailing ','"));
        assert!(err("priority,,laps=1").starts_with("an empty option ',,'"));
        assert!(err("priority,laps").starts_with("'laps' is not KEY=VALUE"));
        assert!(err("priority,=3").starts_with("'=3' has no key"));
        let unknown = err("priority,lap=3");
        assert!(
            unknown.starts_with("unknown option 'lap' (keys: interval_us, "),
            "{unknown}"
        );
        assert!(Key::ALL.iter().all(|k| unknown.contains(k.name())), "{unknown}");
        assert_eq!(err("priority,laps=1,laps=2"), "laps is given twice");
        assert!(err("priority,lazy_us=5").starts_with("lazy_us needs a policy with lazy release"));
        assert!(err("classic,laps=2").starts_with("laps needs a policy that bounds overtaking"));
        assert!(err("lazy,lazy_us=0").starts_with("lazy_us must be a number of microseconds from 1"));
        assert!(err("priority,spin_us=10001").ends_with("not '10001'"));
        assert!(err("priority,spin_us=+1").ends_with("not '+1'"));
        assert!(err("priority,interval_us=3600000001").starts_with("interval_us must be"));
        assert_eq!(err("priority,stats=2"), "stats must be 0 or 1, not '2'");
        assert!(err("priority,trace=x.txt").contains("must end in .json"));
        assert!(err("priority,trace=%d.svg").contains("% must be followed by p"));
        assert!(err("priority,trace=").starts_with("trace needs a file name of 1 to 991 bytes"));
        assert!(err("priority,trace=a.svg,trace_ring=0").starts_with("trace_ring must be"));
        assert_eq!(err("priority,trace_ring=5"), "trace_ring needs trace=PATH");
        // laps is checked on the preset, not on what came before it.
        assert!("monitor,laps=2".parse::<Options>().is_ok());
        let e = Options::parse_without_observers(b"priority,laps=1,stats=1").unwrap_err();
        assert_eq!(e.kind(), &OptionsErrorKind::ObserverNotTaken(Key::Stats));
        assert!(Options::parse_without_observers(b"priority,laps=1").is_ok());
    }

    #[test]
    fn each_number_key_takes_its_range_on_the_presets_that_take_it() {
        for setting in NUMBER_SETTINGS {
            let key = setting.key;
            for preset in PRESETS {
                let base = GilConfig::preset(preset).unwrap().settings();
                for value in [setting.min, setting.max] {
                    let text = format!("{preset},{key}={value}");
                    match text.parse::<Options>() {
                        Ok(o) => {
                            assert!(setting.taken_by(&base), "{text} is taken");
                            assert_eq!(setting.get(&o.settings()), Some(value), "{text}");
                            assert!(o.given(key));
                            assert_eq!(o.to_string(), text);
                            let again = Options::from_settings(o.settings()).unwrap();
                            assert_eq!(again.settings(), o.settings(), "{text} prints as {again}");
                        }
                        Err(e) => {
                            assert!(!setting.taken_by(&base), "{text}: {e}");
                            assert_eq!(e.kind(), &OptionsErrorKind::NotTaken(key));
                        }
                    }
                }
                if !setting.taken_by(&base) {
                    continue;
                }
                let over = setting.max + 1;
                let e = format!("{preset},{key}={over}").parse::<Options>().unwrap_err();
                let expected = OptionsErrorKind::BadValue {
                    key,
                    value: over.to_string(),
                };
                assert_eq!(e.kind(), &expected);
                assert!(e
                    .to_string()
                    .contains(&format!("from {} to {}", setting.min, setting.max)));
                if setting.min > 0 {
                    let under = format!("{preset},{key}={}", setting.min - 1);
                    assert!(under.parse::<Options>().is_err(), "{under}");
                }
            }
        }
    }

    #[test]
    fn a_trace_name_needs_a_file_name_before_its_extension() {
        assert!(err("priority,trace=/tmp/.json").contains("after a file name"));
        assert!(err("priority,trace=.SVG").contains("after a file name"));
        assert!(err("priority,trace=out/.json").contains("after a file name"));
        assert!(err("priority,trace=dir.json/").contains("after a file name"));
        for ok in [
            "priority,trace=/tmp/a.json",
            "priority,trace=..json",
            "priority,trace=%p.svg",
        ] {
            assert!(ok.parse::<Options>().is_ok(), "{ok}");
        }
        assert_eq!(TraceFormat::from_name(b"x/.json"), None);
        assert_eq!(TraceFormat::from_name(b"x/a.Json"), Some(TraceFormat::ChromeJson));
        assert_eq!(TraceFormat::from_name(b"a.svg"), Some(TraceFormat::Svg));
    }

    #[test]
    fn messages_show_the_bytes_escaped() {
        let e = Options::parse(b"prio\xffrity\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "'prio\\xffrity\\n': unknown GIL policy 'prio\\xffrity\\n' (known: {})",
                known_presets()
            )
        );
        let long = "x".repeat(300);
        let e = long.parse::<Options>().unwrap_err().to_string();
        assert!(e.starts_with(&format!("'{}...'", "x".repeat(252))), "{e}");
        assert!(err("priority,trace=\u{0}\u{e9}.svg").contains("UTF-8 without NUL"));
        assert!(Options::parse(b"priority,trace=\xff.svg").is_err());
    }

    #[test]
    fn settings_round_trip_through_text() {
        for preset in PRESETS {
            let s = GilConfig::preset(preset)
                .unwrap()
                .spin_us(7)
                .switch_interval_us(300)
                .settings();
            let o = Options::from_settings(s).unwrap();
            assert_eq!(o.to_string().parse::<Options>().unwrap().settings(), s);
        }
        // Classic ignores laps, so no text says it.
        assert!(Options::from_settings(GilConfig::new().laps(3).settings()).is_none());
        // No preset is classic with lazy release and the monitor.
        let s = GilConfig::new().lazy_release_us(Some(50)).monitor(true).settings();
        assert!(Options::from_settings(s).is_none());
    }

    /// The text a host's lock prints.
    fn printed(host: Host, text: &str) -> String {
        let s = Options::parse_for(host, text.as_bytes()).unwrap().settings();
        Options::from_settings(s).unwrap().to_string()
    }

    #[test]
    fn a_preset_prints_as_what_it_is_on_its_host() {
        assert_eq!(printed(Host::CPython, "priority"), "priority,spin_us=50");
        assert_eq!(printed(Host::OCaml, "priority-lazy"), "priority-lazy,spin_us=200");
        assert_eq!(printed(Host::Ruby, "classic"), "classic,interval_us=100000");
        assert_eq!(
            printed(Host::OCaml, "classic,interval_us=700"),
            "classic,interval_us=700"
        );
        assert_eq!(printed(Host::Generic, "priority"), "priority,spin_us=0");
        assert_eq!(printed(Host::MicroPython, "classic"), "classic,interval_us=5000");
        assert_eq!(printed(Host::CPython, "lazy"), "lazy");
        assert_eq!(printed(Host::Ruby, "monitor"), "monitor");
        assert_eq!(
            printed(Host::OCaml, "priority,spin_us=20,interval_us=0,laps=3"),
            "priority,interval_us=0,spin_us=20,laps=3"
        );
    }

    #[test]
    fn what_one_host_prints_builds_the_same_lock_on_every_host() {
        for &from in Host::ALL {
            for preset in PRESETS {
                let s = Options::parse_for(from, preset.as_bytes()).unwrap().settings();
                let text = printed(from, preset);
                for &on in Host::ALL {
                    let again = Options::parse_for(on, text.as_bytes()).unwrap().settings();
                    assert_eq!(
                        again, s,
                        "{preset} on {from} prints '{text}', which is another lock on {on}"
                    );
                }
            }
        }
    }

    #[test]
    fn every_hosts_default_parses_as_its_own_preset_and_reads_back() {
        for &host in Host::ALL {
            assert!(Options::parse_for(host, host.default_options().as_bytes()).is_ok());
            for preset in PRESETS {
                let text = host.preset_options(preset).unwrap();
                let o = Options::parse_without_observers(text.as_bytes()).unwrap();
                assert_eq!(o.preset(), *preset, "{host}: {text}");
                assert_eq!(o.to_string(), text, "{host}: written as it reads");
            }
        }
    }

    #[test]
    fn each_host_gives_its_presets_the_documented_values() {
        let s = |host: Host, preset: &str| {
            Options::parse_for(host, preset.as_bytes())
                .unwrap_or_else(|e| panic!("{host} {preset}: {e}"))
                .settings()
        };
        for &preset in PRESETS {
            let library = GilConfig::preset(preset).unwrap().settings();
            let priority = library.policy == crate::Policy::Priority;
            assert_eq!(s(Host::Generic, preset), library, "{preset}");
            assert_eq!(s(Host::MicroPython, preset), library, "{preset}");
            let spin = |us| Settings {
                spin_us: if priority { us } else { 0 },
                ..library
            };
            assert_eq!(s(Host::CPython, preset), spin(50), "{preset}");
            let classic_interval = |us| Settings {
                switch_interval_us: if preset == "classic" { us } else { 5_000 },
                ..spin(200)
            };
            assert_eq!(s(Host::OCaml, preset), classic_interval(50_000), "{preset}");
            assert_eq!(s(Host::Ruby, preset), classic_interval(100_000), "{preset}");
        }
    }

    #[test]
    fn options_given_win_over_the_hosts_default() {
        let o = Options::parse_for(Host::OCaml, b"classic,interval_us=700,spin_us=0").unwrap();
        assert_eq!((o.settings().switch_interval_us, o.settings().spin_us), (700, 0));
        assert_eq!(o.to_string(), "classic,interval_us=700,spin_us=0");
        let o = Options::parse_for(Host::CPython, b"priority").unwrap();
        assert_eq!(o.given_mask(), 0, "the host's default is not given by the text");
        assert_eq!(
            o.config().settings().spin_us,
            50,
            "the configuration has the host's default"
        );
        // Bad input is refused as on the generic host.
        let e = Options::parse_for(Host::Ruby, b"priority,lazy_us=5").unwrap_err();
        assert!(
            e.to_string().contains("lazy_us needs a policy with lazy release"),
            "{e}"
        );
        let e = Options::parse_for_without_observers(Host::Ruby, b"priority,stats=1").unwrap_err();
        assert_eq!(e.kind(), &OptionsErrorKind::ObserverNotTaken(Key::Stats));
    }
}
