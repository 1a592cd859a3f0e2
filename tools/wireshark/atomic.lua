-- Wireshark dissector for Aurora's ATOMIC captures.
--
-- `aurora run FILE --capture DIR` (and `aurora node`) write one pcap file
-- per receiving port. A Mosaic node's ports to other nodes hold packets
-- with what is left of their route in front (link type USER0, 147); a
-- host's port, and an IP router's port on the LAN, hold payloads without
-- routes (USER1, 148); a Mosaic node's port from its host holds packets with
-- their whole route in front (USER2, 149). This script decodes all three:
-- the route's (dX, dY) pairs, the message kind and its fields, and IP
-- packets through Wireshark's own IP dissector. The byte layouts are
-- defined in crates/atomic/src/wire.rs.
--
-- Use it for one session:
--   wireshark -X lua_script:tools/wireshark/atomic.lua DIR/m.0.0-p1.pcap
--   tshark -X lua_script:tools/wireshark/atomic.lua -r DIR/b-p0.pcap -V
-- or copy it into Wireshark's personal Lua plugins folder
-- (Help > About Wireshark > Folders) to have it always.

local atomic = Proto("atomic", "Aurora ATOMIC")

local kinds = {
    [1] = "IP",
    [2] = "Raw",
    [3] = "Probe",
    [4] = "HostQuery",
    [5] = "HostInfo",
    [6] = "Announce",
    [7] = "RouteRequest",
    [8] = "RouteReply",
    [9] = "Explore",
    [10] = "Report",
}

local statuses = { [0] = "found", [1] = "unknown address", [2] = "no path" }
local ports = { [0] = "East", [1] = "West", [2] = "North", [3] = "South", [4] = "host" }

local f = {
    route = ProtoField.bytes("atomic.route", "Route"),
    spent = ProtoField.bytes("atomic.spent", "Spent pair"),
    dx = ProtoField.int8("atomic.dx", "dX"),
    dy = ProtoField.int8("atomic.dy", "dY"),
    pairs = ProtoField.uint16("atomic.pairs", "Pairs"),
    kind = ProtoField.uint8("atomic.kind", "Kind", base.DEC, kinds),
    channel = ProtoField.uint16("atomic.channel", "Channel"),
    ac = ProtoField.uint64("atomic.ac", "AC", base.HEX),
    seq = ProtoField.uint32("atomic.seq", "Sequence"),
    epoch = ProtoField.uint32("atomic.epoch", "Epoch"),
    addr = ProtoField.ipv4("atomic.addr", "Address"),
    host = ProtoField.uint64("atomic.host", "Host", base.HEX),
    src = ProtoField.ipv4("atomic.src", "Source"),
    dst = ProtoField.ipv4("atomic.dst", "Destination"),
    kbps = ProtoField.uint32("atomic.kbps", "Bandwidth (kb/s)"),
    status = ProtoField.uint8("atomic.status", "Status", base.DEC, statuses),
    flood = ProtoField.uint64("atomic.flood", "Flood", base.HEX),
    origin = ProtoField.uint64("atomic.origin", "Origin", base.HEX),
    attached = ProtoField.bool("atomic.attached", "Host attached"),
    count = ProtoField.uint16("atomic.count", "Count"),
    hop = ProtoField.bytes("atomic.hop", "Hop"),
    node = ProtoField.uint64("atomic.node", "Node", base.HEX),
    port = ProtoField.uint8("atomic.port", "Port", base.DEC, ports),
    in_port = ProtoField.uint8("atomic.in_port", "In port", base.DEC, ports),
    edge = ProtoField.bytes("atomic.edge", "Edge"),
    data = ProtoField.bytes("atomic.data", "Data"),
}
atomic.fields = {
    f.route, f.spent, f.dx, f.dy, f.pairs, f.kind, f.channel, f.ac, f.seq, f.epoch,
    f.addr, f.host, f.src, f.dst, f.kbps, f.status, f.flood, f.origin, f.attached,
    f.count, f.hop, f.node, f.port, f.in_port, f.edge, f.data,
}

local malformed = ProtoExpert.new("atomic.malformed", "Malformed ATOMIC frame",
    expert.group.MALFORMED, expert.severity.ERROR)
atomic.experts = { malformed }

local ip = Dissector.get("ip")

-- Pairs from `off` to the (0, 0) terminator, under `tree`; the offset after
-- the terminator, or nil if the bytes end first or hold -128.
local function route(buf, off, tree, label)
    local start = off
    local sub = tree:add(f.route, buf(off, 0)):set_text(label)
    local n = 0
    while off + 2 <= buf:len() do
        local dx, dy = buf(off, 1):int(), buf(off + 1, 1):int()
        if dx == -128 or dy == -128 then
            sub:add_proto_expert_info(malformed, "a route byte is -128")
            return nil
        end
        if dx == 0 and dy == 0 then
            sub:set_len(off + 2 - start)
            sub:append_text(string.format(": %d pairs", n))
            return off + 2
        end
        local pair = sub:add(buf(off, 2), string.format("(%d, %d)", dx, dy))
        pair:add(f.dx, buf(off, 1))
        pair:add(f.dy, buf(off + 1, 1))
        n = n + 1
        off = off + 2
    end
    sub:add_proto_expert_info(malformed, "the route has no (0, 0) terminator")
    return nil
end

-- `n` hops (node 8 bytes, port 1) from `off`; the offset after them.
local function hops(buf, off, n, tree)
    for i = 1, n do
        if off + 9 > buf:len() then
            tree:add_proto_expert_info(malformed, "fewer hops than counted")
            return nil
        end
        local h = tree:add(f.hop, buf(off, 9)):set_text(string.format("Hop %d", i))
        h:add(f.node, buf(off, 8))
        h:add(f.port, buf(off + 8, 1))
        off = off + 9
    end
    return off
end

-- Fixed fields: a list of {field, length}, from `off`.
local function fixed(buf, off, tree, list)
    for _, item in ipairs(list) do
        if off + item[2] > buf:len() then
            tree:add_proto_expert_info(malformed, "the message is cut short")
            return nil
        end
        tree:add(item[1], buf(off, item[2]))
        off = off + item[2]
    end
    return off
end

local function counted_hops(buf, off, tree, label)
    if not off or off + 2 > buf:len() then
        return nil
    end
    local n = buf(off, 2):uint()
    local sub = tree:add(f.count, buf(off, 2)):set_text(string.format("%s: %d hops", label, n))
    return hops(buf, off + 2, n, sub)
end

-- The payload from `off`: kind byte, then the message.
local function payload(buf, off, pinfo, tree, top)
    if off >= buf:len() then
        tree:add_proto_expert_info(malformed, "no payload")
        return
    end
    local kind = buf(off, 1):uint()
    tree:add(f.kind, buf(off, 1))
    local name = kinds[kind] or string.format("unknown kind %d", kind)
    pinfo.cols.info:set(name)
    local m = off + 1
    if kind == 1 then
        tree:set_len(m)
        if m < buf:len() then
            ip:call(buf(m):tvb(), pinfo, top)
        end
        return
    elseif kind == 2 then
        m = fixed(buf, m, tree, { { f.channel, 2 } })
    elseif kind == 3 then
        m = fixed(buf, m, tree, { { f.ac, 8 }, { f.seq, 4 } })
        m = counted_hops(buf, m, tree, "Hops")
    elseif kind == 4 then
        m = fixed(buf, m, tree, { { f.ac, 8 }, { f.seq, 4 } })
        m = m and route(buf, m, tree, "Way back")
    elseif kind == 5 then
        m = fixed(buf, m, tree, { { f.ac, 8 }, { f.seq, 4 }, { f.addr, 4 }, { f.host, 8 } })
    elseif kind == 6 then
        m = fixed(buf, m, tree, { { f.ac, 8 }, { f.epoch, 4 }, { f.addr, 4 } })
        m = m and route(buf, m, tree, "Route to the AC")
    elseif kind == 7 then
        m = fixed(buf, m, tree, { { f.seq, 4 }, { f.src, 4 }, { f.dst, 4 }, { f.kbps, 4 } })
        if m then
            pinfo.cols.info:append(string.format(" %s to %s", tostring(buf(off + 5, 4):ipv4()),
                tostring(buf(off + 9, 4):ipv4())))
        end
    elseif kind == 8 then
        m = fixed(buf, m, tree, { { f.seq, 4 }, { f.dst, 4 }, { f.status, 1 }, { f.epoch, 4 } })
        m = m and route(buf, m, tree, "Route")
    elseif kind == 9 then
        m = fixed(buf, m, tree, { { f.flood, 8 } })
        m = counted_hops(buf, m, tree, "Hops")
    elseif kind == 10 then
        m = fixed(buf, m, tree, { { f.flood, 8 }, { f.origin, 8 }, { f.attached, 1 } })
        if m and m < buf:len() then
            local n = buf(m, 1):uint()
            local sub = tree:add(buf(m, 1), string.format("Edges: %d", n))
            m = m + 1
            for i = 1, n do
                if m + 10 > buf:len() then
                    sub:add_proto_expert_info(malformed, "fewer edges than counted")
                    m = nil
                    break
                end
                local e = sub:add(f.edge, buf(m, 10)):set_text(string.format("Edge %d", i))
                e:add(f.node, buf(m, 8))
                e:add(f.port, buf(m + 8, 1))
                e:add(f.in_port, buf(m + 9, 1))
                m = m + 10
            end
        elseif m then
            tree:add_proto_expert_info(malformed, "the message is cut short")
            m = nil
        end
        m = counted_hops(buf, m, tree, "First path")
        m = counted_hops(buf, m, tree, "Way back")
    else
        tree:add_proto_expert_info(malformed, "unknown kind")
        return
    end
    if m and m < buf:len() then
        tree:add(f.data, buf(m))
    end
end

-- A packet as a Mosaic node receives it: route, then payload. From
-- another node, a leading (0, 0) is the pair that ended at this node; from
-- the node's host, it is an empty route (a message for the node itself).
local function routed(buf, pinfo, top, from_host)
    pinfo.cols.protocol:set("ATOMIC")
    local tree = top:add(atomic, buf(), "Aurora ATOMIC packet")
    local off = 0
    if not from_host and buf:len() >= 2 and buf(0, 1):int() == 0 and buf(1, 1):int() == 0 then
        tree:add(f.spent, buf(0, 2)):set_text("Spent pair (0, 0): the last pair ended here")
        off = 2
    end
    off = route(buf, off, tree, "Route")
    if off then
        payload(buf, off, pinfo, tree, top)
    end
end

-- A payload as a host receives it from its node.
local function delivered(buf, pinfo, top)
    pinfo.cols.protocol:set("ATOMIC")
    local tree = top:add(atomic, buf(), "Aurora ATOMIC payload")
    payload(buf, 0, pinfo, tree, top)
end

-- One protocol per link type; the fields are all `atomic`'s.
local from_host = Proto("atomic_from_host", "Aurora ATOMIC packet from a host")
local payload_proto = Proto("atomic_payload", "Aurora ATOMIC payload")
function atomic.dissector(buf, pinfo, top)
    routed(buf, pinfo, top, false)
end
function from_host.dissector(buf, pinfo, top)
    routed(buf, pinfo, top, true)
end
function payload_proto.dissector(buf, pinfo, top)
    delivered(buf, pinfo, top)
end

local encap = DissectorTable.get("wtap_encap")
encap:add(wtap.USER0, atomic)
encap:add(wtap.USER1, payload_proto)
encap:add(wtap.USER2, from_host)
