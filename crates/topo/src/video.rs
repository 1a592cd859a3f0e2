//! Vidboard cameras and their viewers in topology files (`[[camera]]`,
//! `[[viewer]]`): a camera is a one-port node on the cell network
//! ([`aurora_video::vidboard::Vidboard`]); a viewer is a workstation's
//! side of one session with a camera
//! ([`aurora_video::client::VidboardClient`]), also a one-port node.
//!
//! ```toml
//! [[camera]]
//! name = "cam1"
//! source = "synthetic"      # or the path of a .y4m file (looped)
//! seed = 1                  # the synthetic source's seed (default 1)
//!
//! [[viewer]]
//! name = "v1"
//! camera = "cam1"
//! # path = ["v1", "sw1", "cam1"]   # default: the shortest path through ATM switches
//! size = "640x480"          # 640x480 | 320x240 | 160x120
//! format = "mono8"          # mono8 | yuyv
//! lt = 16                   # scan lines per t-frame
//! cb = 56                   # cells per burst
//! interburst = "100us"
//! interframe = "0us"
//! mode = "closed"           # closed (a frame per request) | continuous
//! processing = "0ms"        # the consumer's time per frame
//! start = "0ms"
//! frame_timeout = "5s"
//! # host = "dec5000"        # a receiving-host model (see below), or "none"
//! # pipeline = "vidboard ! busy ms=100 ! ratemeter ! null"
//! # workstation = "ws1"     # viewers on one workstation share its processor
//! ```
//!
//! | field | default | notes |
//! |---|---|---|
//! | `source` | `synthetic` | a y4m file is read when the file is compiled |
//! | `seed` | 1 | synthetic sources only |
//! | `path` | shortest | viewer first, camera last, ATM switches between |
//! | `size`, `format` | `640x480`, `mono8` | |
//! | `lt` | 16 | 1 to the picture's height |
//! | `cb` | 56 | 1 to 65535, and at most the camera link's `buffer` |
//! | `interburst`, `interframe` | 0 | 0 to 4 s |
//! | `mode` | `closed` | |
//! | `processing` | 0 | 0 to 10 s |
//! | `start` | 0 | 0 to 24 h |
//! | `frame_timeout` | 5s | 1 ms to 60 s: a frame not whole by then is given up and asked again |
//! | `check` | true | complete frames checked against the source (synthetic) and their counter line |
//! | `pipeline` | none | `aurora video`'s syntax, first element `vidboard` (no parameters: the frames the network brings); the viewer is then a `PipelineViewer`; not with `processing` (use `busy ms=N`) |
//! | `workstation` | its own | viewers naming the same workstation book their work on one processor, first come, first served: a pipeline's `busy` work, the host model's interrupts, cell reads and t-frame work, and a plain viewer's `processing` |
//!
//! For each viewer the compiler routes two circuits: the control circuit
//! from the viewer to the camera, whose way back (a PVC's table entries
//! work both ways) carries the camera's replies, and the video circuit
//! from the camera to the viewer. The camera gets one control channel
//! per viewer, in file order. The camera's line rate is its link's.
//!
//! A viewer with a host model holds its input while the host works, so
//! the cells behind wait in the switch's output port toward it: its
//! link's `buffer` (default 4,096 cells; `examples/vidboard.toml` sets
//! the seed's 1,024), or that port's `[[port]]` discipline, and are
//! dropped there when it is full. The cells already on the wire when it
//! holds wait in a queue in the viewer of at most the same `buffer`
//! cells (`host_overflow` past that), which also takes the backlog where
//! the hold cannot reach (a line from another worker or process).

use aurora_engine::NodeId;
use serde::Deserialize;

/// A camera (`[[camera]]`), as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CameraDef {
    /// Its name.
    pub name: String,
    /// `synthetic` (the default) or the path of a `.y4m` file.
    #[serde(default)]
    pub source: Option<String>,
    /// The synthetic source's seed (default 1).
    #[serde(default)]
    pub seed: Option<u64>,
}

/// A viewer (`[[viewer]]`), as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ViewerDef {
    /// Its name.
    pub name: String,
    /// The camera it watches.
    pub camera: String,
    /// The nodes from the viewer to the camera (default: the shortest
    /// path through ATM switches).
    #[serde(default)]
    pub path: Option<Vec<String>>,
    /// `640x480` (default), `320x240` or `160x120`.
    #[serde(default)]
    pub size: Option<String>,
    /// `mono8` (default) or `yuyv`.
    #[serde(default)]
    pub format: Option<String>,
    /// Scan lines per t-frame (default 16).
    #[serde(default)]
    pub lt: Option<i64>,
    /// Cells per burst (default 56).
    #[serde(default)]
    pub cb: Option<i64>,
    /// Idle line time between bursts (default 0).
    #[serde(default)]
    pub interburst: Option<String>,
    /// Idle line time between frames (default 0).
    #[serde(default)]
    pub interframe: Option<String>,
    /// `closed` (default: one frame per frame request) or `continuous`.
    #[serde(default)]
    pub mode: Option<String>,
    /// The consumer's time per frame (default 0).
    #[serde(default)]
    pub processing: Option<String>,
    /// When the viewer sends its first command (default 0).
    #[serde(default)]
    pub start: Option<String>,
    /// Check complete frames (default true).
    #[serde(default)]
    pub check: Option<bool>,
    /// A frame asked for and not whole after this long is given up and
    /// asked for again (default 5s).
    #[serde(default)]
    pub frame_timeout: Option<String>,
    /// A receiving-host model: a name (`dec5000`, `dec3000`) or `none`
    /// (the default: a host that takes no time per cell).
    #[serde(default)]
    pub host: Option<String>,
    /// The host model's cost per burst (an interrupt), overriding the
    /// named model's.
    #[serde(default)]
    pub per_burst: Option<String>,
    /// The host model's cost per cell read.
    #[serde(default)]
    pub per_cell: Option<String>,
    /// The host model's cost per t-frame.
    #[serde(default)]
    pub per_tframe: Option<String>,
    /// A pipeline consuming the frames (the syntax of `aurora video`,
    /// first element `vidboard`): the viewer becomes a
    /// [`PipelineViewer`](aurora_video::pipeline::PipelineViewer).
    #[serde(default)]
    pub pipeline: Option<String>,
    /// The workstation the viewer runs on: viewers naming the same one
    /// share its processor (their pipelines' `busy` work, their host
    /// models' work and their `processing` take turns). Default: a
    /// processor of its own.
    #[serde(default)]
    pub workstation: Option<String>,
}

/// A camera after compilation, for reports.
#[derive(Clone, Debug)]
pub struct CameraInfo {
    /// Its name.
    pub name: String,
    /// Its node.
    pub node: NodeId,
    /// Its source, as written (`synthetic seed N` or a path).
    pub source: String,
    /// Its viewers' names, in the order of its control channels.
    pub viewers: Vec<String>,
}

/// A viewer after compilation, for reports.
#[derive(Clone, Debug)]
pub struct ViewerInfo {
    /// Its name.
    pub name: String,
    /// Its node.
    pub node: NodeId,
    /// Its camera's name.
    pub camera: String,
    /// Its camera's node.
    pub camera_node: NodeId,
    /// Its session's place among the camera's control channels.
    pub session: usize,
    /// The video circuit, camera to viewer: each hop's ends and VC.
    pub video_hops: Vec<crate::PvcHop>,
}

/// The cameras and viewers of a network.
#[derive(Clone, Debug, Default)]
pub struct VideoInfo {
    /// Cameras, in file order.
    pub cameras: Vec<CameraInfo>,
    /// Viewers, in file order.
    pub viewers: Vec<ViewerInfo>,
}
