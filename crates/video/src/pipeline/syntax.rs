//! The pipeline syntax of `aurora video`, after GStreamer's `gst-launch`:
//!
//! ```text
//! pipeline := element ( "!" element )*
//! element  := module ( key "=" value )*
//! ```
//!
//! Words are separated by white space; a value has no white space and no
//! `!` (file names with either are not supported). The first element is
//! a source, the others filters; a sink (no output) can only be last. A
//! pipeline whose last element has an output discards what it sends
//! (counted). Every element takes `queue=N` (1 to 64, default 2): the
//! capacity of the queue into its input.
//!
//! | module | role | parameters (default) |
//! |---|---|---|
//! | `synthetic` | source | `size` (320x240), `format` (mono8 or yuyv; mono8), `fps` (30; 0 = as fast as drained), `frames` (for ever), `seed` (1) |
//! | `room` | source | as `synthetic`, and `cycle` (150), `busy` (45): someone crosses the room in the first `busy` frames of every `cycle` ([`RoomScene`]) |
//! | `filesource` | source | `file` (a .y4m, required), `size` (the largest that divides the file), `format`, `paced` (1: the file's frame rate; 0: as fast as drained), `frames` (the file once; more loops it) |
//! | `vidboard` | source | `size`, `format`, `lt` (16), `cb` (56), `interburst` (µs, 0), `frames`, `seed` (1), `file` (a .y4m for the camera to look at; default the synthetic source) |
//! | `exercise` | filter | none |
//! | `edge` | filter | `threshold` (128, 1 to 2040) |
//! | `motion` | filter | `level` (24), `pixels` (300), `hold` (0) |
//! | `ratemeter` | filter | none |
//! | `busy` | filter | `ms` (10, 0 to 10000): holds each frame that long, as work that takes time would ([`Busy`]) |
//! | `filesink` | sink | `file` (y4m), `png` (prefix of snapshots), `every` (30), `fps` (30, the y4m header's), `max_png` (100); `file` or `png` required |
//! | `null` | sink | none |
//!
//! Untrusted text gets one sentence naming the element and the problem
//! ([`SyntaxError`]), never a panic: the text is at most [`MAX_TEXT`]
//! bytes, at most [`MAX_ELEMENTS`] elements of at most [`MAX_PARAMS`]
//! parameters each.

use core::fmt;
use std::path::Path;

use aurora_time::Duration;

use super::room::RoomScene;
use super::vidboard_source::VidboardParams;
use super::{
    Busy, Edge, Exercise, FileSink, Module, Motion, NullSink, Pipeline, Processor, RateMeter,
    SourceModule, VidboardSource, DEFAULT_QUEUE, MAX_QUEUE,
};
use crate::frame::{PictureSize, PixelFormat};
use crate::source::{Source, SyntheticSource, Y4mSource};

/// The longest pipeline text accepted, in bytes.
pub const MAX_TEXT: usize = 4096;
/// The most elements in a pipeline.
pub const MAX_ELEMENTS: usize = 16;
/// The most parameters of one element.
pub const MAX_PARAMS: usize = 16;

/// One parsed element: a module's name and its parameters, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Element {
    /// The module's name.
    pub name: String,
    /// `key=value` pairs.
    pub params: Vec<(String, String)>,
}

/// Why a pipeline text was refused: one sentence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyntaxError(pub String);

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SyntaxError {}

fn err<T>(s: String) -> Result<T, SyntaxError> {
    Err(SyntaxError(s))
}

/// Shortens untrusted text for quoting in an error.
fn quote(s: &str) -> String {
    let mut q: String = s.chars().take(40).flat_map(char::escape_default).collect();
    if s.chars().count() > 40 {
        q.push_str("...");
    }
    format!("`{q}`")
}

/// Splits `text` into elements, checking only the form.
pub fn parse(text: &str) -> Result<Vec<Element>, SyntaxError> {
    if text.len() > MAX_TEXT {
        return err(format!(
            "the pipeline is {} bytes long, more than the {MAX_TEXT} accepted",
            text.len()
        ));
    }
    if text.trim().is_empty() {
        return err("the pipeline is empty".into());
    }
    let parts: Vec<&str> = text.split('!').collect();
    if parts.len() > MAX_ELEMENTS {
        return err(format!(
            "the pipeline has {} elements, more than the {MAX_ELEMENTS} accepted",
            parts.len()
        ));
    }
    let mut out = Vec::with_capacity(parts.len());
    for (i, part) in parts.iter().enumerate() {
        let n = i + 1;
        let mut words = part.split_whitespace();
        let Some(name) = words.next() else {
            return err(format!(
                "element {n} is empty (two `!` in a row, or one at an end)"
            ));
        };
        let mut params: Vec<(String, String)> = Vec::new();
        for w in words {
            if params.len() == MAX_PARAMS {
                return err(format!(
                    "element {n} ({}) has more than the {MAX_PARAMS} parameters accepted",
                    quote(name)
                ));
            }
            let Some((k, v)) = w.split_once('=') else {
                return err(format!(
                    "{} in element {n} ({}) is not of the form key=value",
                    quote(w),
                    quote(name)
                ));
            };
            if k.is_empty() || v.is_empty() {
                return err(format!(
                    "{} in element {n} ({}) has an empty key or value",
                    quote(w),
                    quote(name)
                ));
            }
            if params.iter().any(|(p, _)| p == k) {
                return err(format!(
                    "{} is given twice in element {n} ({})",
                    quote(k),
                    quote(name)
                ));
            }
            params.push((k.to_owned(), v.to_owned()));
        }
        out.push(Element {
            name: name.to_owned(),
            params,
        });
    }
    Ok(out)
}

/// What a module is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Source,
    Filter,
    Sink,
}

/// The modules the syntax knows, their roles and parameters.
const MODULES: &[(&str, Role, &[&str])] = &[
    (
        "synthetic",
        Role::Source,
        &["size", "format", "fps", "frames", "seed"],
    ),
    (
        "room",
        Role::Source,
        &["size", "format", "fps", "frames", "seed", "cycle", "busy"],
    ),
    (
        "filesource",
        Role::Source,
        &["file", "size", "format", "paced", "frames"],
    ),
    (
        "vidboard",
        Role::Source,
        &[
            "size",
            "format",
            "lt",
            "cb",
            "interburst",
            "frames",
            "seed",
            "file",
        ],
    ),
    ("exercise", Role::Filter, &[]),
    ("edge", Role::Filter, &["threshold"]),
    ("busy", Role::Filter, &["ms"]),
    ("motion", Role::Filter, &["level", "pixels", "hold"]),
    ("ratemeter", Role::Filter, &[]),
    (
        "filesink",
        Role::Sink,
        &["file", "png", "every", "fps", "max_png"],
    ),
    ("null", Role::Sink, &[]),
];

/// An element's parameters, read with checks.
struct Params<'a> {
    n: usize,
    el: &'a Element,
}

impl Params<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.el
            .params
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn bad(&self, key: &str, v: &str, what: &str) -> SyntaxError {
        SyntaxError(format!(
            "{key} of element {} ({}) is {}, not {what}",
            self.n,
            self.el.name,
            quote(v)
        ))
    }

    fn num(&self, key: &str, lo: u64, hi: u64, default: u64) -> Result<u64, SyntaxError> {
        let Some(v) = self.get(key) else {
            return Ok(default);
        };
        match v.parse::<u64>() {
            Ok(x) if (lo..=hi).contains(&x) => Ok(x),
            _ => Err(self.bad(key, v, &format!("a whole number from {lo} to {hi}"))),
        }
    }

    fn opt_num(&self, key: &str, lo: u64, hi: u64) -> Result<Option<u64>, SyntaxError> {
        self.get(key).map(|_| self.num(key, lo, hi, lo)).transpose()
    }

    fn size(&self, default: PictureSize) -> Result<PictureSize, SyntaxError> {
        let Some(v) = self.get("size") else {
            return Ok(default);
        };
        PictureSize::ALL
            .into_iter()
            .find(|s| s.to_string() == v)
            .ok_or_else(|| self.bad("size", v, "one of 640x480, 320x240, 160x120"))
    }

    fn format(&self) -> Result<PixelFormat, SyntaxError> {
        let Some(v) = self.get("format") else {
            return Ok(PixelFormat::Mono8);
        };
        PixelFormat::ALL
            .into_iter()
            .find(|f| f.to_string() == v)
            .ok_or_else(|| self.bad("format", v, "mono8 or yuyv"))
    }

    fn wrap(&self, e: impl fmt::Display) -> SyntaxError {
        SyntaxError(format!("element {} ({}): {e}", self.n, self.el.name))
    }

    fn y4m(&self, key: &str) -> Result<Option<Y4mSource>, SyntaxError> {
        self.get(key)
            .map(|f| Y4mSource::open(Path::new(f)).map_err(|e| self.wrap(e)))
            .transpose()
    }
}

/// Frames per second as a period; 0 means unpaced.
fn fps_period(fps: u64) -> Option<Duration> {
    (fps > 0).then(|| Duration::from_nanos((1_000_000_000 / fps) as i64))
}

/// Builds the module an element names (files opened now); a `busy`
/// element's work is booked on `cpu` when one is given.
fn module(n: usize, el: &Element, cpu: Option<&Processor>) -> Result<Box<dyn Module>, SyntaxError> {
    let p = Params { n, el };
    let seed = p.num("seed", 0, u64::MAX, 1)?;
    Ok(match el.name.as_str() {
        "synthetic" => {
            let fps = p.num("fps", 0, 1000, 30)?;
            Box::new(SourceModule::synthetic(
                seed,
                p.size(PictureSize::Half)?,
                p.format()?,
                fps_period(fps),
                p.opt_num("frames", 1, 1_000_000_000)?,
            ))
        }
        "room" => {
            let fps = p.num("fps", 0, 1000, 30)?;
            let cycle = p.num("cycle", 1, 1_000_000, 150)?;
            let busy = p.num("busy", 0, cycle, 45.min(cycle))?;
            let m = SourceModule::new(
                "room",
                Box::new(RoomScene::new(cycle, busy, seed)),
                p.size(PictureSize::Half)?,
                p.format()?,
                fps > 0,
                p.opt_num("frames", 1, 1_000_000_000)?,
            )
            .map_err(|e| p.wrap(e))?;
            Box::new(m)
        }
        "filesource" => {
            let Some(src) = p.y4m("file")? else {
                return err(format!("element {n} (filesource) needs file=PATH"));
            };
            let largest = PictureSize::ALL
                .into_iter()
                .find(|&s| src.supports(s))
                .unwrap_or(PictureSize::Quarter);
            let size = p.size(largest)?;
            let paced = p.num("paced", 0, 1, 1)? == 1;
            let frames = p.opt_num("frames", 1, 1_000_000_000)?;
            Box::new(
                SourceModule::file(src, size, p.format()?, paced, frames).map_err(|e| p.wrap(e))?,
            )
        }
        "vidboard" => {
            let source: Box<dyn Source> = match p.y4m("file")? {
                Some(f) => Box::new(f),
                None => Box::new(SyntheticSource::new(seed)),
            };
            let size = p.size(PictureSize::Half)?;
            let params = VidboardParams {
                size,
                format: p.format()?,
                lt: p.num("lt", 1, size.height() as u64, 16)? as u16,
                cb: p.num("cb", 1, 1024, 56)? as u16,
                interburst: Duration::from_micros(p.num("interburst", 0, 1_000_000, 0)? as i64),
                frames: p.opt_num("frames", 1, 1_000_000_000)?,
            };
            Box::new(VidboardSource::new(source, params).map_err(|e| p.wrap(e))?)
        }
        "exercise" => Box::new(Exercise::new()),
        "busy" => {
            let work = Duration::from_millis(p.num("ms", 0, 10_000, 10)? as i64);
            Box::new(match cpu {
                Some(cpu) => Busy::on(work, cpu.clone()),
                None => Busy::new(work),
            })
        }
        "edge" => Box::new(Edge::new(p.num("threshold", 1, 2040, 128)? as u16)),
        "motion" => Box::new(Motion::new(
            p.num("level", 0, 255, 24)? as u8,
            p.num("pixels", 1, 10_000_000, 300)?,
            p.num("hold", 0, 1_000_000, 0)? as u32,
        )),
        "ratemeter" => Box::new(RateMeter::new()),
        "filesink" => {
            let file = p.get("file").map(Path::new);
            let png = p.get("png").map(Path::new);
            if file.is_none() && png.is_none() {
                return err(format!(
                    "element {n} (filesink) needs file=PATH.y4m or png=PREFIX"
                ));
            }
            let every = p.num("every", 1, 1_000_000, 30)?;
            let fps = p.num("fps", 1, 1000, 30)? as u32;
            let max_png = p.num("max_png", 0, 100_000, 100)?;
            Box::new(FileSink::new(file, fps, png, every, max_png).map_err(|e| p.wrap(e))?)
        }
        "null" => Box::new(NullSink::new()),
        other => unreachable!("module {other} was checked against the table"),
    })
}

/// Checks parsed elements against the modules' table: names, parameters,
/// places. Opens no file.
pub fn check(elements: &[Element]) -> Result<(), SyntaxError> {
    let names: Vec<&str> = MODULES.iter().map(|m| m.0).collect();
    let last = elements.len();
    for (i, el) in elements.iter().enumerate() {
        let n = i + 1;
        let Some(&(_, role, keys)) = MODULES.iter().find(|m| m.0 == el.name) else {
            return err(format!(
                "element {n}, {}, is not a module (modules: {})",
                quote(&el.name),
                names.join(", ")
            ));
        };
        for (k, _) in &el.params {
            if k != "queue" && !keys.contains(&k.as_str()) {
                let mut takes = keys.to_vec();
                takes.push("queue");
                return err(format!(
                    "element {n} ({}) takes no parameter {} (it takes {})",
                    el.name,
                    quote(k),
                    takes.join(", ")
                ));
            }
        }
        match role {
            Role::Source if n != 1 => {
                return err(format!(
                    "element {n} ({}) is a source and can only start the pipeline",
                    el.name
                ))
            }
            Role::Filter | Role::Sink if n == 1 => {
                return err(format!(
                    "element 1 ({}) is not a source; a pipeline starts with synthetic, room, filesource or vidboard",
                    el.name
                ))
            }
            Role::Sink if n != last => {
                return err(format!(
                    "element {n} ({}) has no output and can only end the pipeline",
                    el.name
                ))
            }
            _ => {}
        }
        Params { n, el }.num("queue", 1, MAX_QUEUE as u64, DEFAULT_QUEUE as u64)?;
    }
    Ok(())
}

/// Parses, checks and builds the pipeline `text` describes (files are
/// opened and created now).
pub fn build(text: &str) -> Result<Pipeline, SyntaxError> {
    let elements = parse(text)?;
    check(&elements)?;
    let Some(first) = elements.first() else {
        return err("the pipeline is empty".into());
    };
    let source = module(1, first, None)?;
    assemble(source, &elements, None)
}

/// Builds a checked pipeline with `source` in place of its first
/// element: the elements after it are built from `elements[1..]` (files
/// opened and created now) and joined one after another, each by the
/// queue its `queue` parameter asks for; `busy` elements book their work
/// on `cpu` when one is given. How a network node runs a pipeline whose
/// source it feeds itself.
pub fn assemble(
    source: Box<dyn Module>,
    elements: &[Element],
    cpu: Option<&Processor>,
) -> Result<Pipeline, SyntaxError> {
    let mut p = Pipeline::new();
    p.add(source);
    for (i, el) in elements.iter().enumerate().skip(1) {
        let m = module(i + 1, el, cpu)?;
        let id = p.add(m);
        let cap = Params { n: i + 1, el }.num("queue", 1, MAX_QUEUE as u64, 2)? as usize;
        p.connect(id - 1, 0, id, 0, cap)
            .map_err(|e| SyntaxError(format!("element {}: {e}", i + 1)))?;
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(text: &str) -> String {
        match build(text) {
            Ok(p) => panic!("{text} was accepted as {p:?}"),
            Err(e) => e.0,
        }
    }

    #[test]
    fn well_formed_pipelines_build() {
        let p = build("synthetic frames=3 ! exercise ! edge threshold=100 ! null").unwrap();
        assert_eq!(p.len(), 4);
        assert_eq!(p.kind(2), Some("edge"));
        let p = build("  room cycle=10 busy=3\t!motion ! ratemeter queue=4 ").unwrap();
        assert_eq!(p.len(), 3);
    }

    #[test]
    fn bad_text_gets_one_sentence() {
        assert_eq!(refused(""), "the pipeline is empty");
        assert_eq!(
            refused("synthetic ! ! null"),
            "element 2 is empty (two `!` in a row, or one at an end)"
        );
        assert!(refused("synthetic ! edgy").starts_with("element 2, `edgy`, is not a module"));
        assert_eq!(
            refused("synthetic ! edge foo=1"),
            "element 2 (edge) takes no parameter `foo` (it takes threshold, queue)"
        );
        assert_eq!(
            refused("synthetic ! edge threshold=abc"),
            "threshold of element 2 (edge) is `abc`, not a whole number from 1 to 2040"
        );
        assert_eq!(
            refused("synthetic size=100x100"),
            "size of element 1 (synthetic) is `100x100`, not one of 640x480, 320x240, 160x120"
        );
        assert_eq!(
            refused("edge ! null"),
            "element 1 (edge) is not a source; a pipeline starts with synthetic, room, filesource or vidboard"
        );
        assert_eq!(
            refused("synthetic ! null ! edge"),
            "element 2 (null) has no output and can only end the pipeline"
        );
        assert_eq!(
            refused("synthetic ! synthetic"),
            "element 2 (synthetic) is a source and can only start the pipeline"
        );
        assert_eq!(
            refused("synthetic ! edge threshold"),
            "`threshold` in element 2 (`edge`) is not of the form key=value"
        );
        assert_eq!(
            refused("synthetic seed=1 seed=2"),
            "`seed` is given twice in element 1 (`synthetic`)"
        );
        assert_eq!(
            refused("synthetic ! edge queue=0"),
            "queue of element 2 (edge) is `0`, not a whole number from 1 to 64"
        );
        assert_eq!(
            refused("filesource"),
            "element 1 (filesource) needs file=PATH"
        );
        assert!(refused("filesource file=/nonexistent/x.y4m")
            .starts_with("element 1 (filesource): /nonexistent/x.y4m cannot be read"));
        assert_eq!(
            refused("synthetic ! filesink"),
            "element 2 (filesink) needs file=PATH.y4m or png=PREFIX"
        );
        let long = "synthetic ".repeat(500);
        assert!(refused(&long).starts_with("the pipeline is 5000 bytes long"));
        let many = vec!["exercise"; 20].join(" ! ");
        assert!(refused(&many).starts_with("the pipeline has 20 elements"));
    }
}
