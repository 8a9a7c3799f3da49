//! Hosts: what each runtime on the lock runs for a preset's name.
//!
//! A runtime's own scheduling can suit different values than the
//! library's presets: OCaml's threads were tuned for a 50 ms tick, a spin
//! before sleeping pays off on CPython, OCaml and Ruby. Those defaults are
//! data here, one options text per host and preset ([`Host::preset_options`]),
//! so a host asks the library for them ([`Options::parse_for`](crate::Options::parse_for))
//! and its shim sets no value of its own. Whatever reports a lock prints
//! the options text its settings are ([`Options::from_settings`](crate::Options::from_settings)),
//! which spells out every value a host's default would change: the text
//! printed on one host builds the same lock on every host.
//!
//! | host          | preset name stands for                                   |
//! |---------------|----------------------------------------------------------|
//! | `generic`     | the library's presets ([`GilConfig::preset`](crate::GilConfig::preset)) |
//! | `cpython`     | the priority presets with `spin_us=50`                   |
//! | `micropython` | the library's presets                                    |
//! | `ocaml`       | `classic,interval_us=50000`; the priority presets with `spin_us=200` |
//! | `ruby`        | `classic,interval_us=100000`; the priority presets with `spin_us=200` |
//!
//! ```
//! use gil_core::{Host, Options};
//! let o = Options::parse_for(Host::OCaml, b"priority")?;
//! assert_eq!(o.settings().spin_us, 200);
//! let text = Options::from_settings(o.settings()).unwrap().to_string();
//! assert_eq!(text, "priority,spin_us=200");
//! // The text printed builds the same lock on any host.
//! assert_eq!(Options::parse_for(Host::CPython, text.as_bytes())?.settings(), o.settings());
//! # Ok::<(), gil_core::OptionsError>(())
//! ```

use std::fmt;
use std::str::FromStr;

use crate::escape::shown;
use crate::PRESETS;

/// A runtime on the lock, for the defaults it gives each preset
/// ([`Host::preset_options`]).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Host {
    /// Any other program: the library's presets as they are.
    #[default]
    Generic,
    /// CPython 3.13 (`cpython/`: `-X rust_gil`, `PYTHON_RUST_GIL`).
    CPython,
    /// MicroPython 1.26's unix port (`MICROPY_RUST_GIL`).
    MicroPython,
    /// OCaml 5.3's systhreads (`OCAML_RUST_GIL`).
    OCaml,
    /// Ruby 3.3's GVL (`RUBY_RUST_GIL`).
    Ruby,
}

/// Each host's default for a preset where it is not the library's own:
/// the options text the preset's name stands for on that host (its first
/// word is the preset). Options the user gives win over these.
const HOST_PRESETS: &[(Host, &str)] = &[
    // The spin by default: a CPU-bound thread displaced by an I/O thread
    // stays on its CPU, and the I/O thread's quick calls need no sleep and
    // no wake-up (docs/policies.md, "The spin by default").
    (Host::CPython, "priority,spin_us=50"),
    (Host::CPython, "priority-lazy,spin_us=50"),
    (Host::CPython, "priority-monitor,spin_us=50"),
    (Host::CPython, "priority-lazy-monitor,spin_us=50"),
    // classic keeps OCaml's own tick (Thread_timeout in st_stubs.c, 50 ms);
    // the priority presets spin longer than CPython's (ocaml/README.md).
    (Host::OCaml, "classic,interval_us=50000"),
    (Host::OCaml, "priority,spin_us=200"),
    (Host::OCaml, "priority-lazy,spin_us=200"),
    (Host::OCaml, "priority-monitor,spin_us=200"),
    (Host::OCaml, "priority-lazy-monitor,spin_us=200"),
    // classic keeps Ruby's own timeslice (TIME_QUANTUM_USEC, 100 ms); the
    // priority presets spin as on OCaml (ruby/README.md).
    (Host::Ruby, "classic,interval_us=100000"),
    (Host::Ruby, "priority,spin_us=200"),
    (Host::Ruby, "priority-lazy,spin_us=200"),
    (Host::Ruby, "priority-monitor,spin_us=200"),
    (Host::Ruby, "priority-lazy-monitor,spin_us=200"),
];

impl Host {
    /// Every host, in a stable order (the C ABI's `gil_host_name`).
    pub const ALL: &'static [Host] = &[Host::Generic, Host::CPython, Host::MicroPython, Host::OCaml, Host::Ruby];

    /// The host's name, as accepted by [`FromStr`].
    pub const fn name(self) -> &'static str {
        match self {
            Host::Generic => "generic",
            Host::CPython => "cpython",
            Host::MicroPython => "micropython",
            Host::OCaml => "ocaml",
            Host::Ruby => "ruby",
        }
    }

    /// The options text the host runs when it is given none: `priority` on
    /// the four runtimes (docs/choosing.md says why), `classic` for a
    /// generic program (what [`GilConfig::new`](crate::GilConfig::new) is).
    pub const fn default_options(self) -> &'static str {
        match self {
            Host::Generic => "classic",
            Host::CPython | Host::MicroPython | Host::OCaml | Host::Ruby => "priority",
        }
    }

    /// What `preset` stands for on this host: an options text that starts
    /// with the preset's name (the name alone where the host keeps the
    /// library's preset); `None` if `preset` is not one of [`PRESETS`].
    pub fn preset_options(self, preset: &str) -> Option<&'static str> {
        let name = PRESETS.iter().copied().find(|p| *p == preset)?;
        Some(
            HOST_PRESETS
                .iter()
                .find(|(host, text)| *host == self && first_word(text) == name)
                .map_or(name, |(_, text)| text),
        )
    }

    /// The host named `name` (bytes, as a C host passes them).
    ///
    /// # Errors
    /// [`UnknownHost`], naming it (escaped as in
    /// [`Options`](crate::Options) messages).
    pub fn from_name(name: &[u8]) -> Result<Host, UnknownHost> {
        Host::ALL
            .iter()
            .copied()
            .find(|h| h.name().as_bytes() == name)
            .ok_or_else(|| UnknownHost(shown(name, 128)))
    }
}

fn first_word(text: &str) -> &str {
    text.split(',').next().unwrap_or_default()
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Host {
    type Err = UnknownHost;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Host::from_name(s.as_bytes())
    }
}

/// A host name that [`Host::from_name`] does not know (escaped for display).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownHost(pub String);

impl fmt::Display for UnknownHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let known: Vec<&str> = Host::ALL.iter().map(|h| h.name()).collect();
        write!(f, "unknown GIL host '{}' (known: {})", self.0, known.join(", "))
    }
}

impl std::error::Error for UnknownHost {}

#[cfg(all(test, not(gil_loom)))]
mod tests {
    use super::*;

    #[test]
    fn every_default_is_one_per_host_and_preset_and_names_its_preset() {
        for (host, text) in HOST_PRESETS {
            assert!(PRESETS.contains(&first_word(text)), "{host}: {text}");
            let rows = HOST_PRESETS
                .iter()
                .filter(|(h, t)| h == host && first_word(t) == first_word(text))
                .count();
            assert_eq!(rows, 1, "{host} has one default for {}", first_word(text));
            assert_ne!(*host, Host::Generic, "the generic host is the library's presets");
        }
    }

    #[test]
    fn every_host_has_a_name() {
        for &host in Host::ALL {
            assert_eq!(host.name().parse::<Host>(), Ok(host));
        }
        assert_eq!(Host::default(), Host::Generic);
        assert_eq!(Host::CPython.preset_options("no-such"), None);
        assert_eq!(Host::CPython.preset_options("lazy"), Some("lazy"));
        assert_eq!(Host::Ruby.preset_options("classic"), Some("classic,interval_us=100000"));
    }

    #[test]
    fn an_unknown_host_is_named_in_the_error() {
        let e = "jython".parse::<Host>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown GIL host 'jython' (known: generic, cpython, micropython, ocaml, ruby)"
        );
        let e = Host::from_name(b"py\xffthon").unwrap_err();
        assert!(e.to_string().starts_with("unknown GIL host 'py\\xffthon'"), "{e}");
        assert!("CPython".parse::<Host>().is_err(), "names are lower case, as presets");
    }
}
