-- robowire's Wireshark dissectors: VRPN, XRP (WPILib halsim_xrp), UgCS VSM, VRSP, SpyGlass.
--
-- Install: `robowire wireshark install` (copies this file into Wireshark's personal plugin
-- folder), or `tshark -X lua_script:$(robowire wireshark path) -r capture.pcap`.
-- Message-type names and field names are the ones `robowire decode PROTOCOL FILE --json`
-- prints (`vrpn.type == "vrpn_Tracker Pos_Quat"`); tests/wireshark/ checks this plugin
-- message by message against robowire's own decoders on every capture in tests/data.
-- Units are in each field's name and description. Written for Wireshark >= 4.0 (Lua 5.2).
--
-- UgCS VSM payloads go to Wireshark's protobuf dissector as ugcs.vsm.proto.Vsm_message: add
-- the folder holding `robowire/` (robowire's installed package, or src/ of a checkout) to
-- Preferences > Protocols > ProtoBuf > Protobuf search paths (`robowire wireshark install`
-- does it), or pass
--   -o 'uat:protobuf_search_paths:"<that folder>","FALSE"' \
--   -o 'uat:protobuf_search_paths:"<that folder>/robowire/protocols/ugcs/proto","TRUE"'

local PLUGIN_VERSION = "1.0"
set_plugin_info({
    version = PLUGIN_VERSION,
    description = "robowire: VRPN, XRP, UgCS VSM, VRSP and SpyGlass dissectors",
    repository = "robowire (src/robowire/wireshark/robowire.lua)",
})

-- Default ports: each protocol's WireProtocol.default_port (tests check they agree).
local PORTS = { vrpn = 3883, xrp = 3540, ugcs = 5556, vrsp = 9742, spyglass = 7870 }

-- ------------------------------------------------------------------------------------------
-- shared helpers

-- Declares fields from a list of {key, kind, name, description} and returns key -> ProtoField.
-- kinds: u8 u16 u32 i16 i32 i64 u64 f32 f64 str none time bytes hex8 frame bool
local function declare(proto, abbr, list)
    local out = {}
    local all = {}
    for _, spec in ipairs(list) do
        local key, kind, name, desc = spec[1], spec[2], spec[3], spec[4]
        local full = abbr .. "." .. key
        local f
        if kind == "u8" then f = ProtoField.uint8(full, name, base.DEC, nil, nil, desc)
        elseif kind == "hex8" then f = ProtoField.uint8(full, name, base.HEX, nil, nil, desc)
        elseif kind == "u16" then f = ProtoField.uint16(full, name, base.DEC, nil, nil, desc)
        elseif kind == "u32" then f = ProtoField.uint32(full, name, base.DEC, nil, nil, desc)
        elseif kind == "u64" then f = ProtoField.uint64(full, name, base.DEC, nil, nil, desc)
        elseif kind == "i16" then f = ProtoField.int16(full, name, base.DEC, nil, nil, desc)
        elseif kind == "i32" then f = ProtoField.int32(full, name, base.DEC, nil, nil, desc)
        elseif kind == "i64" then f = ProtoField.int64(full, name, base.DEC, nil, nil, desc)
        elseif kind == "f32" then f = ProtoField.float(full, name, desc)
        elseif kind == "f64" then f = ProtoField.double(full, name, desc)
        elseif kind == "str" then f = ProtoField.new(name, full, ftypes.STRING, nil, nil, nil, desc)
        elseif kind == "none" then f = ProtoField.none(full, name, desc)
        elseif kind == "bytes" then f = ProtoField.bytes(full, name, base.NONE, desc)
        elseif kind == "time" then f = ProtoField.absolute_time(full, name, base.UTC, desc)
        elseif kind == "frame" then f = ProtoField.framenum(full, name, base.NONE, nil, nil, desc)
        elseif kind == "bool" then f = ProtoField.bool(full, name, base.NONE, nil, nil, desc)
        else error("unknown field kind " .. kind) end
        out[key] = f
        all[#all + 1] = f
    end
    proto.fields = all
    return out
end

local function padded8(n)
    return n + (8 - n % 8) % 8
end

-- IEEE 754 binary16, little-endian u16 -> number
local function half(u)
    local sign = (u >= 0x8000) and -1 or 1
    local e = math.floor(u / 1024) % 32
    local m = u % 1024
    if e == 0 then return sign * m * 2 ^ -24 end
    if e == 31 then return (m == 0) and sign * math.huge or 0 / 0 end
    return sign * (1 + m / 1024) * 2 ^ (e - 15)
end

-- to `digits` decimals, ties to even (as robowire decode's Python round)
local function round(x, digits)
    local k = 10 ^ digits
    local y = x * k
    local f = math.floor(y)
    local d = y - f
    if d > 0.5 or (d == 0.5 and f % 2 == 1) then f = f + 1 end
    return f / k
end

local function fmt(x)
    return string.format("%.6g", x)
end

-- "a:1>b:2" for the direction of a packet
local function direction(pinfo)
    return tostring(pinfo.src) .. ":" .. tostring(pinfo.src_port) .. ">"
        .. tostring(pinfo.dst) .. ":" .. tostring(pinfo.dst_port)
end

-- Info column: this call's first message replaces what is there (after TCP's fence), later
-- ones and later PDUs of the same frame are appended after a comma
local function info_append(pinfo, text, first)
    if first then pinfo.cols.info:clear() end
    local sep = (tostring(pinfo.cols.info) ~= "") and ", " or ""
    pinfo.cols.info:append(sep .. text)
end

-- A minimal JSON reader (objects, arrays, strings, numbers, true/false/null) for VRSP_DEF
-- definitions. Returns value or nil, error.
local function json_decode(text)
    local pos = 1
    local depth = 0
    local function ws()
        pos = text:find("[^ \t\r\n]", pos) or (#text + 1)
    end
    local value
    local function str()
        local out = {}
        pos = pos + 1
        while true do
            local c = text:sub(pos, pos)
            if c == "" then error("unterminated string") end
            if c == '"' then pos = pos + 1; break end
            if c == "\\" then
                local e = text:sub(pos + 1, pos + 1)
                local map = { b = "\b", f = "\f", n = "\n", r = "\r", t = "\t" }
                if e == "u" then
                    local code = tonumber(text:sub(pos + 2, pos + 5), 16) or 63
                    out[#out + 1] = code < 128 and string.char(code) or "?"
                    pos = pos + 6
                else
                    out[#out + 1] = map[e] or e
                    pos = pos + 2
                end
            else
                out[#out + 1] = c
                pos = pos + 1
            end
        end
        return table.concat(out)
    end
    value = function()
        ws()
        local c = text:sub(pos, pos)
        if c == "{" then
            depth = depth + 1
            if depth > 64 then error("JSON nested too deep") end
            local obj = {}
            pos = pos + 1
            ws()
            if text:sub(pos, pos) == "}" then pos = pos + 1; depth = depth - 1; return obj end
            while true do
                ws()
                if text:sub(pos, pos) ~= '"' then error("object key expected") end
                local k = str()
                ws()
                if text:sub(pos, pos) ~= ":" then error("':' expected") end
                pos = pos + 1
                obj[k] = value()
                ws()
                local d = text:sub(pos, pos)
                pos = pos + 1
                if d == "}" then break end
                if d ~= "," then error("',' or '}' expected") end
            end
            depth = depth - 1
            return obj
        elseif c == "[" then
            depth = depth + 1
            if depth > 64 then error("JSON nested too deep") end
            local arr = { n = 0 }
            pos = pos + 1
            ws()
            if text:sub(pos, pos) == "]" then pos = pos + 1; depth = depth - 1; return arr end
            while true do
                arr.n = arr.n + 1
                arr[arr.n] = value()
                ws()
                local d = text:sub(pos, pos)
                pos = pos + 1
                if d == "]" then break end
                if d ~= "," then error("',' or ']' expected") end
            end
            depth = depth - 1
            return arr
        elseif c == '"' then
            return str()
        elseif text:sub(pos, pos + 3) == "true" then pos = pos + 4; return true
        elseif text:sub(pos, pos + 4) == "false" then pos = pos + 5; return false
        elseif text:sub(pos, pos + 3) == "null" then pos = pos + 4; return nil
        else
            local num = text:match("^-?%d+%.?%d*[eE]?[-+]?%d*", pos)
            if not num or num == "" then error("unexpected character at " .. pos) end
            pos = pos + #num
            return tonumber(num)
        end
    end
    local ok, result = pcall(value)
    if not ok then return nil, tostring(result) end
    return result
end

-- JSON key lookup, case-insensitive (VRSP definitions are written with either spelling)
local function jget(obj, ...)
    if type(obj) ~= "table" then return nil end
    for _, key in ipairs({ ... }) do
        local low = key:lower()
        for k, v in pairs(obj) do
            if type(k) == "string" and k:lower() == low then return v end
        end
    end
    return nil
end

-- ==========================================================================================
-- VRPN (TCP/UDP 3883): cookie, 24-byte headers, bodies padded to 8 bytes; ids named by the
-- SENDER_/TYPE_DESCRIPTION messages each side sent earlier on its stream.

local vrpn = Proto("vrpn", "VRPN (Virtual Reality Peripheral Network)")
local V = declare(vrpn, "vrpn", {
    { "type", "str", "Message type", "the message's type name, as robowire decode prints it" },
    { "version", "str", "Cookie version", "magic cookie: 'vrpn: ver. 07.38'" },
    { "log_mode", "u8", "Cookie log mode", "what the peer is asked to log (0 none .. 3 both)" },
    { "length", "u32", "Length (bytes)", "header length field: 24 + unpadded body bytes" },
    { "msg_time", "time", "Sender time", "the sender's timestamp (tv_sec, tv_usec), UTC" },
    { "sender_id", "i32", "Sender id", "sender id in the sending side's numbering" },
    { "sender", "str", "Sender", "the sender's name, from its SENDER_DESCRIPTION" },
    { "type_id", "i32", "Type id", "message type id; negative = system message" },
    { "seq", "u32", "Sequence", "per-channel sequence number" },
    { "id", "i32", "Described id", "the sender or type id a description names" },
    { "name", "str", "Described name", "the sender or type name a description gives" },
    { "port", "u32", "UDP port", "the UDP port this side receives on" },
    { "host", "str", "UDP host", "the host this side receives UDP on" },
    { "incoming_name", "str", "Incoming log file", "log file name for incoming messages" },
    { "outgoing_name", "str", "Outgoing log file", "log file name for outgoing messages" },
    { "sensor", "i32", "Sensor", "tracker sensor number" },
    { "position", "none", "Position (m)", "x, y, z in metres (tracker frame)" },
    { "position.x", "f64", "x (m)", "metres" },
    { "position.y", "f64", "y (m)", "metres" },
    { "position.z", "f64", "z (m)", "metres" },
    { "quaternion", "none", "Orientation (quaternion x, y, z, w)", "unit quaternion, wire order x y z w" },
    { "quaternion.x", "f64", "qx", "quaternion x (unitless)" },
    { "quaternion.y", "f64", "qy", "quaternion y (unitless)" },
    { "quaternion.z", "f64", "qz", "quaternion z (unitless)" },
    { "quaternion.w", "f64", "qw", "quaternion w (unitless)" },
    { "velocity", "none", "Velocity (m/s)", "metres per second" },
    { "velocity.x", "f64", "vx (m/s)", "metres per second" },
    { "velocity.y", "f64", "vy (m/s)", "metres per second" },
    { "velocity.z", "f64", "vz (m/s)", "metres per second" },
    { "velocity_quaternion", "none", "Rotation over dt (quaternion x, y, z, w)", "rotation during velocity_quaternion_dt" },
    { "velocity_quaternion.x", "f64", "qx", "unitless" },
    { "velocity_quaternion.y", "f64", "qy", "unitless" },
    { "velocity_quaternion.z", "f64", "qz", "unitless" },
    { "velocity_quaternion.w", "f64", "qw", "unitless" },
    { "velocity_quaternion_dt", "f64", "Rotation interval (s)", "seconds the velocity quaternion spans" },
    { "acceleration", "none", "Acceleration (m/s^2)", "metres per second squared" },
    { "acceleration.x", "f64", "ax (m/s^2)", "metres per second squared" },
    { "acceleration.y", "f64", "ay (m/s^2)", "metres per second squared" },
    { "acceleration.z", "f64", "az (m/s^2)", "metres per second squared" },
    { "acceleration_quaternion", "none", "Angular acceleration over dt (quaternion x, y, z, w)", "rotation change during acceleration_quaternion_dt" },
    { "acceleration_quaternion.x", "f64", "qx", "unitless" },
    { "acceleration_quaternion.y", "f64", "qy", "unitless" },
    { "acceleration_quaternion.z", "f64", "qz", "unitless" },
    { "acceleration_quaternion.w", "f64", "qw", "unitless" },
    { "acceleration_quaternion_dt", "f64", "Acceleration interval (s)", "seconds" },
    { "minimum", "none", "Workspace minimum (m)", "metres" },
    { "minimum.x", "f64", "x (m)", "metres" },
    { "minimum.y", "f64", "y (m)", "metres" },
    { "minimum.z", "f64", "z (m)", "metres" },
    { "maximum", "none", "Workspace maximum (m)", "metres" },
    { "maximum.x", "f64", "x (m)", "metres" },
    { "maximum.y", "f64", "y (m)", "metres" },
    { "maximum.z", "f64", "z (m)", "metres" },
    { "rate", "f64", "Update rate (Hz)", "reports per second" },
    { "channel_count", "f64", "Channel count", "analog channel count (sent as a double)" },
    { "channels", "none", "Analog channels", "channel values (device units)" },
    { "channels.value", "f64", "Channel value", "device units" },
    { "channel", "i32", "Channel", "analog output channel" },
    { "value", "f64", "Value", "analog output value (device units)" },
    { "value_count", "i32", "Value count", "analog output channel count" },
    { "values", "none", "Analog output values", "device units" },
    { "values.value", "f64", "Value", "device units" },
    { "num_channels", "i32", "Channels", "analog output channels the server has" },
    { "button", "i32", "Button", "button number (-99: all buttons)" },
    { "state", "i32", "State", "1 pressed, 0 released" },
    { "button_count", "i32", "Button count", "buttons in the States message" },
    { "states", "none", "Button states", "1 pressed, 0 released, per button" },
    { "states.value", "i32", "State", "1 pressed, 0 released" },
    { "mode", "i32", "Mode", "button mode (10 momentary, 20/21 toggle) or log mode" },
    { "delta", "f64", "Dial delta (revolutions)", "revolutions since the last update" },
    { "dial", "i32", "Dial", "dial number" },
    { "severity", "u32", "Severity", "0 normal, 1 warning, 2 error" },
    { "level", "u32", "Level", "text message level" },
    { "text", "str", "Text", "text message" },
    { "dt", "f64", "Interval (s)", "seconds" },
    { "host_port", "str", "Connection request", "'host port' the client listens on (UDP lob)" },
    { "body", "bytes", "Body", "message body (not dissected)" },
})

local VRPN_SYSTEM = {
    [-1] = "SENDER_DESCRIPTION", [-2] = "TYPE_DESCRIPTION", [-3] = "UDP_DESCRIPTION",
    [-4] = "LOG_DESCRIPTION", [-5] = "DISCONNECT_MESSAGE",
}
local VRPN_MAGIC = "vrpn: ver. "
local VRPN_MAX_LENGTH = 24 + 64008

-- body layouts: i32 key | f64 key | skip n | vec3 key | quat key | f64list count_key key | ...
local VRPN_BODIES = {}
do
    local pose = { { "i32", "sensor" }, { "skip", 4 }, { "vec3", "position" }, { "quat", "quaternion" } }
    VRPN_BODIES["vrpn_Tracker Pos_Quat"] = pose
    VRPN_BODIES["vrpn_Tracker Unit_To_Sensor"] = pose
    VRPN_BODIES["vrpn_Tracker Velocity"] = { { "i32", "sensor" }, { "skip", 4 }, { "vec3", "velocity" },
        { "quat", "velocity_quaternion" }, { "f64", "velocity_quaternion_dt" } }
    VRPN_BODIES["vrpn_Tracker Acceleration"] = { { "i32", "sensor" }, { "skip", 4 }, { "vec3", "acceleration" },
        { "quat", "acceleration_quaternion" }, { "f64", "acceleration_quaternion_dt" } }
    local room = { { "vec3", "position" }, { "quat", "quaternion" } }
    VRPN_BODIES["vrpn_Tracker To_Room"] = room
    VRPN_BODIES["vrpn_Poser Request Pos_Quat"] = room
    VRPN_BODIES["vrpn_Poser Request Relative Pos_Quat"] = room
    local poser_vel = { { "vec3", "velocity" }, { "quat", "quaternion" }, { "f64", "dt" } }
    VRPN_BODIES["vrpn_Poser Request Velocity"] = poser_vel
    VRPN_BODIES["vrpn_Poser Request Relative Velocity"] = poser_vel
    VRPN_BODIES["vrpn_Tracker Workspace"] = { { "vec3", "minimum" }, { "vec3", "maximum" } }
    for _, name in ipairs({ "vrpn_Tracker Request_Tracker_To_Room", "vrpn_Tracker Request_Unit_To_Sensor",
        "vrpn_Tracker Request_Tracker_Workspace", "vrpn_Tracker Reset_Origin",
        "vrpn_Base ping_message", "vrpn_Base pong_message" }) do
        VRPN_BODIES[name] = {}
    end
    VRPN_BODIES["vrpn_Tracker set_update_rate"] = { { "f64", "rate" } }
    VRPN_BODIES["vrpn_Analog Channel"] = { { "list", "channel_count", "channels", "f64", 0, "f64" } }
    VRPN_BODIES["vrpn_Analog_Output Change_request"] = { { "i32", "channel" }, { "skip", 4 }, { "f64", "value" } }
    VRPN_BODIES["vrpn_Analog_Output Change_Channels_request"] = { { "list", "value_count", "values", "i32", 4, "f64" } }
    VRPN_BODIES["vrpn_Analog_Output Num_Channels_report"] = { { "i32", "num_channels" } }
    VRPN_BODIES["vrpn_Button Change"] = { { "i32", "button" }, { "i32", "state" } }
    VRPN_BODIES["vrpn_Button States"] = { { "list", "button_count", "states", "i32", 0, "i32" } }
    VRPN_BODIES["vrpn_Button Admin"] = { { "i32", "button" }, { "i32", "mode" } }
    VRPN_BODIES["vrpn_Button Alert"] = { { "i32", "button" }, { "i32", "mode" } }
    VRPN_BODIES["vrpn_Dial update"] = { { "f64", "delta" }, { "i32", "dial" } }
    VRPN_BODIES["vrpn_Base text_message"] = { { "u32", "severity" }, { "u32", "level" }, { "cstr", "text", 1024 } }
end

local function vrpn_vector(tree, tvb, off, key, axes)
    local n = #axes
    local item = tree:add(V[key], tvb(off, 8 * n))
    local parts = {}
    for i, axis in ipairs(axes) do
        local r = tvb(off + 8 * (i - 1), 8)
        item:add(V[key .. "." .. axis], r)
        parts[i] = fmt(r:float())
    end
    item:append_text(": " .. table.concat(parts, ", "))
    return off + 8 * n
end

-- Dissects a body by layout; returns false and a reason if the body is too short.
local function vrpn_body(tree, tvb, off, size, layout)
    local stop = off + size
    local function need(n)
        if off + n > stop then error(string.format("body is %d bytes, layout needs more", size), 0) end
    end
    local ok, err = pcall(function()
        for _, op in ipairs(layout) do
            local kind, key = op[1], op[2]
            if kind == "skip" then need(key); off = off + key
            elseif kind == "i32" then need(4); tree:add(V[key], tvb(off, 4)); off = off + 4
            elseif kind == "u32" then need(4); tree:add(V[key], tvb(off, 4)); off = off + 4
            elseif kind == "f64" then need(8); tree:add(V[key], tvb(off, 8)); off = off + 8
            elseif kind == "vec3" then need(24); off = vrpn_vector(tree, tvb, off, key, { "x", "y", "z" })
            elseif kind == "quat" then need(32); off = vrpn_vector(tree, tvb, off, key, { "x", "y", "z", "w" })
            elseif kind == "cstr" then
                local n = math.min(stop - off, op[3])
                if n > 0 then
                    local text = tvb(off, n):stringz()
                    tree:add(V[key], tvb(off, n), text)
                end
                off = off + n
            elseif kind == "list" then
                -- {"list", count key, list key, count type, filler bytes, item type}
                local count_kind, filler, item_kind = op[4], op[5], op[6]
                local width = (count_kind == "f64") and 8 or 4
                need(width)
                local r = tvb(off, width)
                local count = (count_kind == "f64") and r:float() or r:int()
                tree:add(V[key], r)
                off = off + width + filler
                local item_width = (item_kind == "f64") and 8 or 4
                if count < 0 or count > 256 or count ~= math.floor(count) then
                    error("bad count " .. tostring(count), 0)
                end
                need(item_width * count)
                local list = tree:add(V[op[3]], tvb(off, item_width * count))
                list:append_text(string.format(" (%d)", count))
                for _ = 1, count do
                    list:add(V[op[3] .. ".value"], tvb(off, item_width))
                    off = off + item_width
                end
            end
        end
    end)
    if not ok then return false, err end
    return true
end

-- per-direction name tables: names[direction] = {senders = {}, types = {}}
local vrpn_names = {}
local vrpn_udp_names = {} -- UDP port -> direction whose names datagrams to it use
local vrpn_seen = {} -- frame number -> {index -> {sender, type}} from the first pass
local vrpn_frame, vrpn_index = -1, 0

local function vrpn_reverse(dir)
    local a, b = dir:match("^(.-)>(.*)$")
    return b .. ">" .. a
end

local function vrpn_table(dir)
    local t = vrpn_names[dir]
    if not t then t = { senders = {}, types = {} }; vrpn_names[dir] = t end
    return t
end

local function vrpn_udp_table(pinfo)
    local dir = vrpn_udp_names[pinfo.dst_port]
    if dir then return vrpn_table(dir) end
    local src = tostring(pinfo.src) .. ":"
    for d, t in pairs(vrpn_names) do
        if d:sub(1, #src) == src and next(t.types) then return t end
    end
    return vrpn_table(direction(pinfo))
end

local function vrpn_message(tvb, pinfo, tree, off, used, names)
    local length = tvb(off, 4):uint()
    local sender_id = tvb(off + 12, 4):int()
    local type_id = tvb(off + 16, 4):int()
    local body_off, size = off + 24, length - 24
    -- names resolved on the first pass are kept for later passes (the GUI re-dissects)
    if pinfo.number ~= vrpn_frame then vrpn_frame, vrpn_index = pinfo.number, 0 end
    vrpn_index = vrpn_index + 1
    local memo = vrpn_seen[pinfo.number] and vrpn_seen[pinfo.number][vrpn_index]
    local sender_name, type_name
    if memo and pinfo.visited then
        sender_name, type_name = memo[1], memo[2]
    else
        sender_name, type_name = names.senders[sender_id], names.types[type_id]
        vrpn_seen[pinfo.number] = vrpn_seen[pinfo.number] or {}
        vrpn_seen[pinfo.number][vrpn_index] = { sender_name, type_name }
    end
    local name = VRPN_SYSTEM[type_id] or type_name or "undescribed"
    local t = tree:add(vrpn, tvb(off, used), "VRPN " .. name)
    t:add(V.type, name):set_generated()
    t:add(V.length, tvb(off, 4))
    t:add(V.msg_time, tvb(off + 4, 8), NSTime.new(tvb(off + 4, 4):uint(), tvb(off + 8, 4):uint() * 1000))
    t:add(V.sender_id, tvb(off + 12, 4))
    t:add(V.type_id, tvb(off + 16, 4))
    t:add(V.seq, tvb(off + 20, 4))
    local ok, err = true, nil
    if VRPN_SYSTEM[type_id] then
        if type_id == -1 or type_id == -2 then
            t:add(V.id, tvb(off + 12, 4))
            if size >= 5 then
                local n = math.min(tvb(body_off, 4):uint(), size - 4)
                local text = tvb(body_off + 4, n):stringz()
                t:add(V.name, tvb(body_off + 4, n), text)
                if not pinfo.visited then
                    if type_id == -1 then names.senders[sender_id] = text else names.types[sender_id] = text end
                end
                t:append_text(": " .. sender_id .. " = " .. text)
            else
                ok, err = false, "description body too short"
            end
        elseif type_id == -3 then
            t:add(V.port, tvb(off + 12, 4))
            if size > 0 then t:add(V.host, tvb(body_off, size), tvb(body_off, size):stringz()) end
            if not pinfo.visited and sender_id > 0 and sender_id < 65536 then
                vrpn_udp_names[sender_id] = vrpn_reverse(direction(pinfo))
                DissectorTable.get("udp.port"):add(sender_id, vrpn)
            end
        elseif type_id == -4 then
            t:add(V.mode, tvb(off + 12, 4))
            if size >= 10 then
                local a, b = tvb(body_off, 4):int(), tvb(body_off + 4, 4):int()
                if a >= 0 and b >= 0 and 8 + a + b + 2 <= size then
                    t:add(V.incoming_name, tvb(body_off + 8, a + 1), tvb(body_off + 8, a):string())
                    t:add(V.outgoing_name, tvb(body_off + 9 + a, b + 1), tvb(body_off + 9 + a, b):string())
                else
                    ok, err = false, "log description names do not fit"
                end
            end
        end
    else
        if sender_name then t:add(V.sender, sender_name):set_generated() end
        local layout = type_name and VRPN_BODIES[type_name]
        if layout then
            ok, err = vrpn_body(t, tvb, body_off, size, layout)
        elseif size > 0 then
            t:add(V.body, tvb(body_off, size))
        end
        if sender_name then t:append_text(" from " .. sender_name) end
    end
    if not ok then t:add_expert_info(PI_MALFORMED, PI_ERROR, err) end
    return name
end

local function vrpn_dissect(tvb, pinfo, tree, stream)
    local len = tvb:len()
    local off = 0
    local first = true
    local dir = direction(pinfo)
    local names = stream and vrpn_table(dir) or vrpn_udp_table(pinfo)
    pinfo.cols.protocol = "VRPN"
    if not stream and len > 2 and tvb(len - 1, 1):uint() == 0 then
        local text = tvb(0, len - 1):string()
        if text:match("^[%w%.]+ %d+$") then
            local t = tree:add(vrpn, tvb(0, len), "VRPN connection_request")
            t:add(V.type, "connection_request"):set_generated()
            t:add(V.host_port, tvb(0, len - 1))
            pinfo.cols.info:set("connection_request " .. text)
            return len
        end
    end
    while off < len do
        local rest = len - off
        local head = tvb(off, math.min(rest, #VRPN_MAGIC)):string()
        if head == VRPN_MAGIC:sub(1, #head) and (stream or rest >= 24) then
            if rest < 24 then
                pinfo.desegment_offset, pinfo.desegment_len = off, 24 - rest
                return len
            end
            local t = tree:add(vrpn, tvb(off, 24), "VRPN cookie")
            t:add(V.type, "cookie"):set_generated()
            t:add(V.version, tvb(off, 16), tvb(off, 16):string():gsub("%s+$", ""))
            t:add(V.log_mode, tvb(off + 18, 1), tvb(off + 18, 1):uint() - 0x30)
            info_append(pinfo, "cookie " .. tvb(off, 16):string():gsub("%s+$", ""), first)
            first = false
            off = off + 24
        else
            if rest < 24 then
                if not stream then break end
                pinfo.desegment_offset, pinfo.desegment_len = off, DESEGMENT_ONE_MORE_SEGMENT
                return len
            end
            local length = tvb(off, 4):uint()
            if length < 24 or length > VRPN_MAX_LENGTH then
                local t = tree:add(vrpn, tvb(off, rest), "VRPN (framing lost)")
                t:add_expert_info(PI_MALFORMED, PI_ERROR, "length field " .. length .. " is not 24.." .. VRPN_MAX_LENGTH)
                return len
            end
            local used = 24 + padded8(length - 24)
            if rest < used then
                if stream then
                    pinfo.desegment_offset, pinfo.desegment_len = off, used - rest
                    return len
                end
                local t = tree:add(vrpn, tvb(off, rest), "VRPN (truncated)")
                t:add_expert_info(PI_MALFORMED, PI_ERROR, "truncated message in datagram")
                return len
            end
            local name = vrpn_message(tvb, pinfo, tree, off, used, names)
            info_append(pinfo, name, first)
            first = false
            off = off + used
        end
    end
    return off
end

function vrpn.dissector(tvb, pinfo, tree)
    return vrpn_dissect(tvb, pinfo, tree, pinfo.port_type == 2) -- 2 = PT_TCP
end

local function vrpn_heuristic(tvb, pinfo, tree)
    if tvb:len() < #VRPN_MAGIC or tvb(0, #VRPN_MAGIC):string() ~= VRPN_MAGIC then return false end
    -- the rest of this connection is VRPN too: follow it by its (lower, server) port
    DissectorTable.get("tcp.port"):add(math.min(pinfo.src_port, pinfo.dst_port), vrpn)
    vrpn.dissector(tvb, pinfo, tree)
    return true
end

DissectorTable.get("tcp.port"):add(PORTS.vrpn, vrpn)
DissectorTable.get("udp.port"):add(PORTS.vrpn, vrpn)
vrpn:register_heuristic("tcp", vrpn_heuristic)

-- ==========================================================================================
-- XRP (UDP 3540): u16 sequence, u8 control, then [u8 size][u8 tag][payload] blocks.

local xrp = Proto("xrp", "XRP (WPILib halsim_xrp)")
local X = declare(xrp, "xrp", {
    { "type", "str", "Message type", "XRP (one datagram)" },
    { "length", "u32", "Length (bytes)", "datagram bytes" },
    { "seq", "u16", "Sequence", "per-direction sequence number" },
    { "control", "u8", "Control", "client -> robot: 1 = enabled" },
    { "block", "none", "Block", "one tagged block" },
    { "block.type", "str", "Block type", "block name as robowire decode prints it" },
    { "block.size", "u8", "Block size (bytes)", "tag + payload bytes" },
    { "block.tag", "hex8", "Block tag", "0x12 motor .. 0x18 encoder" },
    { "block.payload", "bytes", "Payload", "payload of an unknown tag" },
    { "motor.id", "u8", "Motor", "0 left, 1 right, 2 motor3, 3 motor4" },
    { "motor.value", "f32", "Motor output (-1..1)", "fraction of full power, -1..1" },
    { "servo.id", "u8", "Servo", "servo channel 4..7" },
    { "servo.value", "f32", "Servo position (0..1)", "fraction of 180 degrees, 0..1" },
    { "dio.id", "u8", "DIO channel", "digital channel (robot 0 = button, client 1 = LED)" },
    { "dio.value", "u8", "DIO value", "1 true, else false" },
    { "analog.id", "u8", "Analog channel", "0/1 reflectance, 2 rangefinder" },
    { "analog.value", "f32", "Analog input (V)", "volts, 0..5" },
    { "gyro.rate_x", "f32", "Rate x (deg/s)", "degrees per second" },
    { "gyro.rate_y", "f32", "Rate y (deg/s)", "degrees per second" },
    { "gyro.rate_z", "f32", "Rate z (deg/s)", "degrees per second" },
    { "gyro.angle_x", "f32", "Angle x / roll (deg)", "degrees" },
    { "gyro.angle_y", "f32", "Angle y / pitch (deg)", "degrees" },
    { "gyro.angle_z", "f32", "Angle z / yaw (deg)", "degrees" },
    { "accel.x", "f32", "Acceleration x (g)", "standard gravities" },
    { "accel.y", "f32", "Acceleration y (g)", "standard gravities" },
    { "accel.z", "f32", "Acceleration z (g)", "standard gravities (resting z = +1 g)" },
    { "encoder.id", "u8", "Encoder", "0 left, 1 right, 2 motor3, 3 motor4" },
    { "encoder.count", "i32", "Count (ticks)", "encoder ticks" },
    { "encoder.period", "u32", "Period numerator", "(period ticks << 1) | forward; 0xFFFFFFFF = no period" },
    { "encoder.divisor", "u32", "Period divisor (ticks/s)", "period clock ticks per second" },
    { "encoder.period_seconds", "f64", "Period (s)", "seconds per count, negative when reversing" },
})

-- tag -> {block type, field prefix, layout {key, kind, bytes}}
local XRP_TAGS = {
    [0x12] = { "XRPMotor", "motor", { { "id", 1 }, { "value", 4 } } },
    [0x13] = { "XRPServo", "servo", { { "id", 1 }, { "value", 4 } } },
    [0x14] = { "DIO", "dio", { { "id", 1 }, { "value", 1 } } },
    [0x15] = { "AnalogIn", "analog", { { "id", 1 }, { "value", 4 } } },
    [0x16] = { "Gyro", "gyro", { { "rate_x", 4 }, { "rate_y", 4 }, { "rate_z", 4 }, { "angle_x", 4 },
        { "angle_y", 4 }, { "angle_z", 4 } } },
    [0x17] = { "Accel", "accel", { { "x", 4 }, { "y", 4 }, { "z", 4 } } },
    [0x18] = { "Encoder", "encoder", { { "id", 1 }, { "count", 4 }, { "period", 4 }, { "divisor", 4 } } },
}

function xrp.dissector(tvb, pinfo, tree)
    local len = tvb:len()
    if len < 3 then return 0 end
    pinfo.cols.protocol = "XRP"
    local t = tree:add(xrp, tvb(), "XRP")
    t:add(X.type, "XRP"):set_generated()
    t:add(X.length, len):set_generated()
    t:add(X.seq, tvb(0, 2))
    t:add(X.control, tvb(2, 1))
    local off = 3
    local kinds = {}
    while off < len do
        local size = tvb(off, 1):uint()
        if size < 1 or off + 1 + size > len then
            t:add_expert_info(PI_MALFORMED, PI_ERROR, "block of size " .. size .. " past the datagram")
            break
        end
        local tag = tvb(off + 1, 1):uint()
        local spec = XRP_TAGS[tag]
        local b = t:add(X.block, tvb(off, size + 1))
        b:add(X["block.type"], spec and spec[1] or "unknown"):set_generated()
        b:add(X["block.size"], tvb(off, 1))
        b:add(X["block.tag"], tvb(off + 1, 1))
        local p = off + 2
        local stop = off + 1 + size
        if spec then
            local layout = spec[3]
            if tag == 0x18 and size == 6 then layout = { layout[1], layout[2] } end -- legacy
            local need = 0
            for _, f in ipairs(layout) do need = need + f[2] end
            if stop - p < need then
                b:add_expert_info(PI_MALFORMED, PI_ERROR, spec[1] .. " block shorter than its layout")
            else
                local parts = {}
                for _, f in ipairs(layout) do
                    b:add(X[spec[2] .. "." .. f[1]], tvb(p, f[2]))
                    local r = tvb(p, f[2])
                    local shown = (f[2] == 4 and (spec[2] ~= "encoder")) and fmt(r:float()) or tostring(r:uint())
                    parts[#parts + 1] = f[1] .. "=" .. shown
                    p = p + f[2]
                end
                if tag == 0x18 and #layout == 4 then
                    local period, divisor = tvb(off + 7, 4):uint(), tvb(off + 11, 4):uint()
                    if period < 0xFFFFFFFE and divisor ~= 0 then
                        local seconds = math.floor(period / 2) / divisor
                        if period % 2 == 0 then seconds = -seconds end
                        b:add(X["encoder.period_seconds"], tvb(off + 7, 8), seconds):set_generated()
                    end
                end
                b:append_text(": " .. spec[1] .. " " .. table.concat(parts, " "))
            end
            kinds[#kinds + 1] = spec[1]
        else
            if size > 1 then b:add(X["block.payload"], tvb(p, size - 1)) end
            b:append_text(string.format(": unknown tag 0x%02x", tag))
        end
        off = stop
    end
    pinfo.cols.info:set(string.format("XRP seq=%d %s", tvb(0, 2):uint(), table.concat(kinds, " ")))
    return len
end

DissectorTable.get("udp.port"):add(PORTS.xrp, xrp)

-- ==========================================================================================
-- UgCS VSM (TCP 5556): <LEB128 length><Vsm_message>, the message through Wireshark's
-- protobuf dissector with robowire's .proto files.

local ugcs = Proto("ugcs", "UgCS VSM")
local U = declare(ugcs, "ugcs", {
    { "type", "str", "Message type", "which payload the Vsm_message holds (as robowire decode names it)" },
    { "length", "u32", "Length (bytes)", "LEB128 length prefix: bytes of the Vsm_message" },
    { "device_id", "u32", "Device id", "0 = peer-level traffic" },
    { "message_id", "u32", "Message id", "request/response correlation id" },
    { "response_required", "bool", "Response required", "the peer must answer" },
    { "payload", "bytes", "Vsm_message", "serialized ugcs.vsm.proto.Vsm_message" },
})
local UGCS_MAX_FRAME = 16 * 1024 * 1024
local UGCS_KINDS = { [4] = "register_peer", [5] = "register_device", [6] = "unregister_device",
    [9] = "device_status", [7] = "device_commands", [8] = "device_response" }
local UGCS_ORDER = { 4, 5, 6, 9, 7, 8 } -- robowire's kind_of order

-- LEB128 at off: value, bytes used; nil if cut short, false if longer than 5 bytes
local function leb128(tvb, off, limit)
    local value, shift = 0, 0
    for i = 0, 9 do
        if off + i >= limit then return nil end
        local b = tvb(off + i, 1):uint()
        value = value + (b % 128) * 2 ^ shift
        shift = shift + 7
        if b < 128 then return value, i + 1 end
    end
    return false
end

-- the top-level fields of a Vsm_message: number -> {value or {offset, length}}, in order
local function ugcs_fields(tvb, off, stop)
    local seen = {}
    while off < stop do
        local key, n = leb128(tvb, off, stop)
        if not key then return seen, "bad field key" end
        off = off + n
        local number, wire = math.floor(key / 8), key % 8
        if wire == 0 then
            local v, m = leb128(tvb, off, stop)
            if not v then return seen, "bad varint" end
            seen[number] = { value = v, offset = off, size = m }
            off = off + m
        elseif wire == 2 then
            local l, m = leb128(tvb, off, stop)
            if not l or off + m + l > stop then return seen, "length past the message" end
            seen[number] = { value = l, offset = off + m, size = l }
            off = off + m + l
        elseif wire == 5 then off = off + 4
        elseif wire == 1 then off = off + 8
        else return seen, "unknown wire type " .. wire end
    end
    return seen
end

local protobuf = Dissector.get("protobuf")

local function ugcs_message(tvb, pinfo, tree, off, n, size)
    local start = off + n
    local seen, err = ugcs_fields(tvb, start, start + size)
    local kind = "empty"
    for _, number in ipairs(UGCS_ORDER) do
        if seen[number] then kind = UGCS_KINDS[number]; break end
    end
    local device_id = seen[1] and seen[1].value or 0
    if kind == "empty" and device_id == 0 and seen[3] and seen[3].value ~= 0 then kind = "ping" end
    local t = tree:add(ugcs, tvb(off, n + size), "UgCS VSM " .. kind)
    t:add(U.type, kind):set_generated()
    t:add(U.length, tvb(off, n), size)
    if seen[1] then t:add(U.device_id, tvb(seen[1].offset, seen[1].size), seen[1].value) end
    if seen[2] then t:add(U.message_id, tvb(seen[2].offset, seen[2].size), seen[2].value) end
    if seen[3] then
        t:add(U.response_required, tvb(seen[3].offset, seen[3].size), seen[3].value ~= 0)
    end
    if err then t:add_expert_info(PI_MALFORMED, PI_ERROR, err) end
    t:append_text(string.format(" (device %d)", device_id))
    if size > 0 then
        local body = tvb(start, size)
        local item = t:add(U.payload, body)
        pinfo.private["pb_msg_type"] = "message,ugcs.vsm.proto.Vsm_message"
        protobuf:call(body:tvb(), pinfo, item)
    end
    return kind
end

function ugcs.dissector(tvb, pinfo, tree)
    local len = tvb:len()
    local off = 0
    local first = true
    pinfo.cols.protocol = "UgCS"
    while off < len do
        local size, n = leb128(tvb, off, len)
        if size == nil then
            pinfo.desegment_offset, pinfo.desegment_len = off, DESEGMENT_ONE_MORE_SEGMENT
            return len
        end
        if size == false or size > UGCS_MAX_FRAME then
            local t = tree:add(ugcs, tvb(off), "UgCS VSM (framing lost)")
            t:add_expert_info(PI_MALFORMED, PI_ERROR, "frame length is not a LEB128 number up to 16 MiB")
            return len
        end
        if off + n + size > len then
            pinfo.desegment_offset, pinfo.desegment_len = off, off + n + size - len
            return len
        end
        local kind = ugcs_message(tvb, pinfo, tree, off, n, size)
        pinfo.cols.protocol = "UgCS"
        info_append(pinfo, kind, first)
        first = false
        off = off + n + size
    end
    return off
end

DissectorTable.get("tcp.port"):add(PORTS.ugcs, ugcs)

-- ==========================================================================================
-- VRSP (UDP 9742): identifier ("VRSP_DEF"/"VRSP_DATA", length-prefixed, NUL-terminated or
-- bare), version u8, instance u32 (all little-endian). DATA records are laid out by the
-- definitions of the latest VRSP_DEF of their instance seen before them in the capture.

local vrsp = Proto("vrsp", "VRSP (Verge Aero drone show)")
local S = declare(vrsp, "vrsp", {
    { "type", "str", "Message type", "VRSP_DEF or VRSP_DATA" },
    { "length", "u32", "Length (bytes)", "datagram bytes" },
    { "identifier", "str", "Identifier", "packet identifier string" },
    { "version", "u8", "Version", "protocol version (1)" },
    { "instance", "u32", "Instance", "swarm configuration id" },
    { "device_count", "u32", "Device count", "devices in the swarm" },
    { "root", "none", "Root (origin of x, y, z)", "geodetic origin" },
    { "root.latitude", "f64", "Latitude (deg)", "degrees" },
    { "root.longitude", "f64", "Longitude (deg)", "degrees" },
    { "root.altitude", "f64", "Altitude (m)", "metres" },
    { "definitions", "none", "Definition blocks", "definitions and the devices using each" },
    { "block", "none", "Definition block", "one definition and its device ids" },
    { "devices", "u32", "Devices", "devices with this definition" },
    { "json_length", "u32", "JSON length (bytes)", "bytes of the definition JSON" },
    { "json", "str", "Definition JSON", "the definition as sent" },
    { "definition_id", "u32", "Definition id", "DefinitionID" },
    { "device_model", "str", "Device model", "DeviceModel / ModelName" },
    { "payload_definition", "str", "Payload definition", "DefType / mount (wire layout)" },
    { "ids", "none", "Device ids", "ids of the devices using the definition" },
    { "ids.id", "u16", "Device id", "drone id" },
    { "frame", "u32", "Frame", "DATA frame number" },
    { "part", "u16", "Part", "datagram index within the frame" },
    { "parts", "u16", "Parts", "datagrams in the frame" },
    { "record_count", "u16", "Records", "records in this datagram" },
    { "def_frame", "frame", "Definition in frame", "the VRSP_DEF these records were read with" },
    { "records", "none", "Records", "one per drone" },
    { "record", "none", "Record", "one drone" },
    { "id", "u16", "Device id", "drone id" },
    { "definition", "u32", "Definition id", "the drone's DefinitionID" },
    { "position", "none", "Position (m)", "x East, y Up, z North (left-handed), metres from the root" },
    { "position.x", "f32", "x East (m)", "metres" },
    { "position.y", "f32", "y Up (m)", "metres" },
    { "position.z", "f32", "z North (m)", "metres" },
    { "flags", "hex8", "Flags", "0x1 colour, 0x2 heading, 0x4 orientation" },
    { "color", "none", "Colour (RGB)", "show LED colour, 0..255 each" },
    { "color.r", "u8", "Red", "0..255" },
    { "color.g", "u8", "Green", "0..255" },
    { "color.b", "u8", "Blue", "0..255" },
    { "heading", "f32", "Heading (deg)", "degrees, 0 = north, clockwise (binary16 on the wire)" },
    { "orientation", "none", "Orientation (quaternion w, x, y, z)", "binary16 each, unitless" },
    { "orientation.w", "f32", "qw", "unitless" },
    { "orientation.x", "f32", "qx", "unitless" },
    { "orientation.y", "f32", "qy", "unitless" },
    { "orientation.z", "f32", "qz", "unitless" },
    { "payloads", "none", "Payloads", "payload states in the definition's order" },
    { "payload", "none", "Payload", "one payload's state" },
    { "payload.type", "str", "Payload type", "DefType: Light, Laser or Pyro" },
    { "payload.cue", "u8", "Cue", "pyro cue firing (0 = none)" },
    { "payload.ms_since_trigger", "u16", "Since trigger (ms)", "milliseconds since the cue fired" },
    { "payload.intensity", "u8", "Intensity", "fixed-colour light intensity, 0..255" },
    { "payload.rgb", "none", "RGB", "light colour, 0..255 each" },
    { "payload.rgb.r", "u8", "Red", "0..255" },
    { "payload.rgb.g", "u8", "Green", "0..255" },
    { "payload.rgb.b", "u8", "Blue", "0..255" },
    { "payload.gimbal", "none", "Gimbal (quaternion w, x, y, z)", "relative to the body; binary16 each" },
    { "payload.gimbal.w", "f32", "qw", "unitless" },
    { "payload.gimbal.x", "f32", "qx", "unitless" },
    { "payload.gimbal.y", "f32", "qy", "unitless" },
    { "payload.gimbal.z", "f32", "qz", "unitless" },
    { "note", "str", "Note", "why the records are not decoded" },
})

local VRSP_NAMES = { "VRSP_DEF", "VRSP_DATA" }

-- (name, bytes used) of the identifier, or nil
local function vrsp_identifier(tvb)
    local len = tvb:len()
    if len < 6 then return nil end
    local first = tvb(0, 1):uint()
    if first > 0 and first < 0x80 and tvb(1, 5):string() == "VRSP_" then
        if 1 + first > len then return nil end
        local name = tvb(1, first):string()
        for _, n in ipairs(VRSP_NAMES) do if n == name then return name, 1 + first end end
        return nil
    end
    for _, n in ipairs(VRSP_NAMES) do
        if len >= #n and tvb(0, #n):string() == n then
            local used = #n
            if len > used and tvb(used, 1):uint() == 0 then used = used + 1 end
            return n, used
        end
    end
    return nil
end

-- a definition's wire layout: list of {type, kind ("rgb"|"level"|"pyro"), gimbal}
local function vrsp_layout(obj)
    local payloads = {}
    local list = jget(obj, "PayloadDefinitions")
    if type(list) == "table" then
        for i = 1, (list.n or #list) do
            local p = list[i]
            local def_type = tostring(jget(p, "DefType"))
            local mount = jget(p, "MountType", "MountDef") or "Static"
            local kind = "rgb"
            if def_type == "Pyro" then kind = "pyro" elseif jget(p, "Color") ~= nil then kind = "level" end
            payloads[#payloads + 1] = { type = def_type, kind = kind, gimbal = tostring(mount) ~= "Static" }
        end
    end
    return { id = tonumber(jget(obj, "DefinitionID")) or -1, payloads = payloads }
end

local vrsp_tables = {} -- instance -> {count, by_id = {id -> layout}, frame}
local vrsp_used = {} -- DATA frame number -> table it was read with (first pass)

local function vrsp_def(tvb, pinfo, t, at, instance)
    local len = tvb:len()
    if len < at + 28 then
        t:add_expert_info(PI_MALFORMED, PI_ERROR, "VRSP_DEF cut short")
        return
    end
    local count = tvb(at, 4):le_uint()
    t:add_le(S.device_count, tvb(at, 4))
    local root = t:add(S.root, tvb(at + 4, 24))
    root:add_le(S["root.latitude"], tvb(at + 4, 8))
    root:add_le(S["root.longitude"], tvb(at + 12, 8))
    root:add_le(S["root.altitude"], tvb(at + 20, 8))
    root:append_text(string.format(": %.6f, %.6f, %.1f", tvb(at + 4, 8):le_float(),
        tvb(at + 12, 8):le_float(), tvb(at + 20, 8):le_float()))
    at = at + 28
    local known = vrsp_tables[instance]
    local table_ = (known and known.count == count) and known or { count = count, by_id = {}, frame = pinfo.number }
    local defs = t:add(S.definitions, tvb(at, len - at))
    local blocks = 0
    while at < len do
        if len - at < 8 then
            defs:add_expert_info(PI_MALFORMED, PI_ERROR, "definition block header cut short")
            break
        end
        local devices, jlen = tvb(at, 4):le_uint(), tvb(at + 4, 4):le_uint()
        if at + 8 + jlen + 2 * devices > len then
            defs:add_expert_info(PI_MALFORMED, PI_ERROR, "definition block past the datagram")
            break
        end
        local b = defs:add(S.block, tvb(at, 8 + jlen + 2 * devices))
        b:add_le(S.devices, tvb(at, 4))
        b:add_le(S.json_length, tvb(at + 4, 4))
        local text = jlen > 0 and tvb(at + 8, jlen):string(ENC_UTF_8) or ""
        b:add(S.json, tvb(at + 8, math.max(jlen, 0)), text)
        local obj, err = json_decode(text)
        local layout
        if obj then
            layout = vrsp_layout(obj)
            b:add(S.definition_id, layout.id):set_generated()
            b:add(S.device_model, tostring(jget(obj, "DeviceModel", "ModelName") or "")):set_generated()
            for _, p in ipairs(layout.payloads) do
                b:add(S.payload_definition, p.type .. " (" .. p.kind .. (p.gimbal and ", gimballed" or "") .. ")")
                    :set_generated()
            end
            b:append_text(string.format(": id %d, %d devices", layout.id, devices))
        else
            b:add_expert_info(PI_MALFORMED, PI_ERROR, "definition is not JSON: " .. err)
        end
        at = at + 8 + jlen
        local ids = b:add(S.ids, tvb(at, 2 * devices))
        for i = 0, devices - 1 do
            local id = tvb(at + 2 * i, 2):le_uint()
            ids:add_le(S["ids.id"], tvb(at + 2 * i, 2))
            if layout and not pinfo.visited then table_.by_id[id] = layout end
        end
        at = at + 2 * devices
        blocks = blocks + 1
    end
    if not pinfo.visited then vrsp_tables[instance] = table_ end
    defs:append_text(string.format(" (%d)", blocks))
end

local function vrsp_f16s(tree, tvb, p, key, axes)
    local item = tree:add(S[key], tvb(p, 2 * #axes))
    local parts = {}
    for i, axis in ipairs(axes) do
        local r = tvb(p + 2 * (i - 1), 2)
        local v = half(r:le_uint())
        item:add(S[key .. "." .. axis], r, v)
        parts[i] = fmt(v)
    end
    item:append_text(": " .. table.concat(parts, ", "))
    return p + 2 * #axes
end

local function vrsp_records(tvb, t, p, count, table_)
    local records = t:add(S.records, tvb(p, tvb:len() - p))
    records:append_text(string.format(" (%d)", count))
    local len = tvb:len()
    for _ = 1, count do
        if len - p < 15 then
            records:add_expert_info(PI_MALFORMED, PI_ERROR, "record cut short")
            return
        end
        local start = p
        local id = tvb(p, 2):le_uint()
        local layout = table_.by_id[id]
        local r = records:add(S.record, tvb(p, 15))
        r:add_le(S.id, tvb(p, 2))
        if not layout then
            r:add_expert_info(PI_MALFORMED, PI_ERROR, "device " .. id .. " is not in the VRSP_DEF")
            return
        end
        r:add(S.definition, layout.id):set_generated()
        p = p + 2
        local pos = r:add(S.position, tvb(p, 12))
        local xyz = {}
        for i, axis in ipairs({ "x", "y", "z" }) do
            pos:add_le(S["position." .. axis], tvb(p + 4 * (i - 1), 4))
            xyz[i] = fmt(tvb(p + 4 * (i - 1), 4):le_float())
        end
        pos:append_text(": " .. table.concat(xyz, ", "))
        p = p + 12
        local flags = tvb(p, 1):uint()
        r:add(S.flags, tvb(p, 1))
        p = p + 1
        local ok, err = pcall(function()
            if bit32.band(flags, 1) ~= 0 then
                local c = r:add(S.color, tvb(p, 3))
                c:add(S["color.r"], tvb(p, 1)); c:add(S["color.g"], tvb(p + 1, 1)); c:add(S["color.b"], tvb(p + 2, 1))
                p = p + 3
            end
            if bit32.band(flags, 2) ~= 0 then
                r:add(S.heading, tvb(p, 2), round(half(tvb(p, 2):le_uint()), 3))
                p = p + 2
            end
            if bit32.band(flags, 4) ~= 0 then
                p = vrsp_f16s(r, tvb, p, "orientation", { "w", "x", "y", "z" })
            end
            if #layout.payloads > 0 then
                local list = r:add(S.payloads, tvb(p, 0))
                local list_start = p
                for _, pd in ipairs(layout.payloads) do
                    local begin = p
                    local item = list:add(S.payload, tvb(p, 0))
                    item:add(S["payload.type"], pd.type):set_generated()
                    if pd.kind == "pyro" then
                        item:add(S["payload.cue"], tvb(p, 1))
                        item:add_le(S["payload.ms_since_trigger"], tvb(p + 1, 2))
                        p = p + 3
                    elseif pd.kind == "level" then
                        item:add(S["payload.intensity"], tvb(p, 1))
                        p = p + 1
                    else
                        local c = item:add(S["payload.rgb"], tvb(p, 3))
                        c:add(S["payload.rgb.r"], tvb(p, 1)); c:add(S["payload.rgb.g"], tvb(p + 1, 1))
                        c:add(S["payload.rgb.b"], tvb(p + 2, 1))
                        p = p + 3
                    end
                    if pd.gimbal then p = vrsp_f16s(item, tvb, p, "payload.gimbal", { "w", "x", "y", "z" }) end
                    item:set_len(p - begin)
                    item:append_text(": " .. pd.type)
                end
                list:set_len(p - list_start)
            end
        end)
        if not ok then
            r:add_expert_info(PI_MALFORMED, PI_ERROR, "record cut short")
            return
        end
        r:set_len(p - start)
        r:append_text(string.format(": drone %d", id))
    end
end

function vrsp.dissector(tvb, pinfo, tree)
    local name, at = vrsp_identifier(tvb)
    if not name then return 0 end
    local len = tvb:len()
    pinfo.cols.protocol = "VRSP"
    local t = tree:add(vrsp, tvb(), name)
    t:add(S.type, name):set_generated()
    t:add(S.length, len):set_generated()
    t:add(S.identifier, tvb(0, at), name)
    if len < at + 5 then
        t:add_expert_info(PI_MALFORMED, PI_ERROR, name .. " header cut short")
        return len
    end
    t:add(S.version, tvb(at, 1))
    local instance = tvb(at + 1, 4):le_uint()
    t:add_le(S.instance, tvb(at + 1, 4))
    at = at + 5
    if name == "VRSP_DEF" then
        vrsp_def(tvb, pinfo, t, at, instance)
        pinfo.cols.info:set(string.format("VRSP_DEF instance=%d", instance))
        return len
    end
    if len < at + 10 then
        t:add_expert_info(PI_MALFORMED, PI_ERROR, "VRSP_DATA frame header cut short (implicit DATA is not dissected)")
        return len
    end
    t:add_le(S.frame, tvb(at, 4))
    t:add_le(S.part, tvb(at + 4, 2))
    t:add_le(S.parts, tvb(at + 6, 2))
    local count = tvb(at + 8, 2):le_uint()
    t:add_le(S.record_count, tvb(at + 8, 2))
    pinfo.cols.info:set(string.format("VRSP_DATA instance=%d frame=%d part %d/%d, %d records", instance,
        tvb(at, 4):le_uint(), tvb(at + 4, 2):le_uint() + 1, tvb(at + 6, 2):le_uint(), count))
    local table_
    if pinfo.visited then table_ = vrsp_used[pinfo.number] else
        table_ = vrsp_tables[instance]
        vrsp_used[pinfo.number] = table_
    end
    if not table_ then
        t:add(S.note, "no VRSP_DEF of this instance before it: records not decoded"):set_generated()
        return len
    end
    t:add(S.def_frame, table_.frame):set_generated()
    vrsp_records(tvb, t, at + 10, count, table_)
    return len
end

local function vrsp_heuristic(tvb, pinfo, tree)
    if not vrsp_identifier(tvb) then return false end
    vrsp.dissector(tvb, pinfo, tree)
    return true
end

DissectorTable.get("udp.port"):add(PORTS.vrsp, vrsp)
vrsp:register_heuristic("udp", vrsp_heuristic)

-- ==========================================================================================
-- SpyGlass (TCP 7870): packets back to back, each a 19-byte big-endian header (u16 length of
-- what follows it) and a payload whose meaning comes from the syntax and semantic types.

local spyglass = Proto("spyglass", "SpyGlass")
local G = declare(spyglass, "spyglass", {
    { "type", "str", "Packet type", "packet class, as robowire decode names it" },
    { "length", "u16", "Length (bytes)", "bytes after the length field" },
    { "version", "u8", "Version", "always 2" },
    { "syntax_type", "str", "Syntax type", "payload layout: std, uint8_list .. float_list, variable" },
    { "syntax", "u8", "Syntax type code", "0 std, 1..6 lists, 7 variable list" },
    { "semantic_type", "u8", "Semantic type", "what the packet means (see the profile preference)" },
    { "sender", "u16", "Sender", "sender node id" },
    { "seconds", "u32", "Time (s)", "Unix seconds" },
    { "milliseconds", "u16", "Time (ms)", "milliseconds of that second" },
    { "packet_time", "time", "Packet time", "the sender's time stamp, UTC" },
    { "x", "i16", "Sender x (units)", "int16 position units (unitless)" },
    { "y", "i16", "Sender y (units)", "int16 position units (unitless)" },
    { "z", "i16", "Sender z (units)", "int16 position units (unitless)" },
    { "neighbors", "none", "Neighbours", "node ids of the sender's neighbours" },
    { "neighbors.id", "u16", "Neighbour", "node id" },
    { "destination", "u16", "Destination", "node the link goes to" },
    { "values", "none", "Values", "list values (wire units)" },
    { "values.u8", "u8", "Value", "uint8" },
    { "values.u16", "u16", "Value", "uint16" },
    { "values.i16", "i16", "Value", "int16" },
    { "values.u32", "u32", "Value", "uint32" },
    { "values.i64", "i64", "Value", "int64" },
    { "values.f32", "f32", "Value", "float" },
    { "points", "none", "Points", "coordinates in int16 position units" },
    { "point", "none", "Point", "one point (int16 position units)" },
    { "point.x", "i16", "x (units)", "int16 position units" },
    { "point.y", "i16", "y (units)", "int16 position units" },
    { "point.z", "i16", "z (units)", "int16 position units" },
    { "durations", "none", "Durations (s)", "seconds from one trajectory point to the next" },
    { "durations.s", "i16", "Duration (s)", "seconds" },
    { "items", "none", "Items", "variable-list (type, value) items" },
    { "item", "none", "Item", "one variable-list item" },
    { "item.syntax", "str", "Item type", "uint8 .. float" },
    { "item.u8", "u8", "Value", "uint8" },
    { "item.u16", "u16", "Value", "uint16" },
    { "item.i16", "i16", "Value", "int16" },
    { "item.u32", "u32", "Value", "uint32" },
    { "item.i64", "i64", "Value", "int64" },
    { "item.f32", "f32", "Value", "float" },
    { "payload", "bytes", "Payload", "std packet payload" },
})

local SG_SYNTAX = { [0] = "std", "uint8_list", "uint16_list", "int16_list", "uint32_list", "int64_list",
    "float_list", "variable" }
local SG_ITEM = { { "u8", 1 }, { "u16", 2 }, { "i16", 2 }, { "u32", 4 }, { "i64", 8 }, { "f32", 4 } }
local SG_NEEDS = { neighborhood = 2, ["node-link"] = 2, ["coordinates-2d"] = 3, ["coordinates-3d"] = 3,
    ["trajectory-2d"] = 3, ["trajectory-3d"] = 3 }

spyglass.prefs.profile = Pref.string("Semantic profile",
    "10=neighborhood,20=data,30=coordinates-2d,40=trajectory-3d",
    "semantic type -> meaning, as robowire's spyglass profile option: "
        .. "'10=neighborhood,20=data,30=coordinates-2d,40=trajectory-3d' (the 2009 demo's)")

local function sg_profile()
    local out = {}
    for part in string.gmatch(spyglass.prefs.profile, "[^,]+") do
        local a, b, meaning = part:match("^%s*(%d+)%-?(%d*)%s*=%s*([%w%-]+)")
        if a then
            for code = tonumber(a), tonumber(b ~= "" and b or a) do
                if out[code] == nil then out[code] = meaning end
            end
        end
    end
    return out
end

local function sg_list(tree, tvb, p, stop, key, child, width)
    local item = tree:add(G[key], tvb(p, stop - p))
    local n = 0
    while p + width <= stop do
        item:add(G[key .. "." .. child], tvb(p, width))
        p = p + width
        n = n + 1
    end
    item:append_text(string.format(" (%d)", n))
end

local function sg_points(tree, tvb, p, count, dims, with_durations)
    local points = tree:add(G.points, tvb(p, 0))
    local durations
    local start = p
    for i = 1, count do
        local item = points:add(G.point, tvb(p, 2 * dims))
        local xyz = {}
        for d, axis in ipairs({ "x", "y", "z" }) do
            if d > dims then break end
            item:add(G["point." .. axis], tvb(p, 2))
            xyz[d] = tostring(tvb(p, 2):int())
            p = p + 2
        end
        item:append_text(": " .. table.concat(xyz, ", "))
        if with_durations and i < count then
            durations = durations or tree:add(G.durations, tvb(p, 0))
            durations:add(G["durations.s"], tvb(p, 2))
            p = p + 2
        end
    end
    points:set_len(p - start)
    points:append_text(string.format(" (%d)", count))
end

-- one packet at off, size bytes in all; returns its type name
local function sg_packet(tvb, tree, off, size, profile)
    local t = tree:add(spyglass, tvb(off, size), "SpyGlass")
    local syntax = tvb(off + 3, 1):uint()
    local semantic = tvb(off + 4, 1):uint()
    t:add(G.length, tvb(off, 2))
    t:add(G.version, tvb(off + 2, 1))
    t:add(G.syntax_type, tvb(off + 3, 1), SG_SYNTAX[syntax] or "?")
    t:add(G.syntax, tvb(off + 3, 1))
    t:add(G.semantic_type, tvb(off + 4, 1))
    t:add(G.sender, tvb(off + 5, 2))
    t:add(G.seconds, tvb(off + 7, 4))
    t:add(G.milliseconds, tvb(off + 11, 2))
    local secs, ms = tvb(off + 7, 4):uint(), tvb(off + 11, 2):uint()
    t:add(G.packet_time, tvb(off + 7, 6), NSTime.new(secs + math.floor(ms / 1000), (ms % 1000) * 1000000))
        :set_generated()
    t:add(G.x, tvb(off + 13, 2))
    t:add(G.y, tvb(off + 15, 2))
    t:add(G.z, tvb(off + 17, 2))
    local p, stop = off + 19, off + size
    local n_bytes = stop - p
    local meaning = profile[semantic] or "data"
    local name
    local function fail(reason)
        t:add_expert_info(PI_MALFORMED, PI_ERROR, reason)
        name = "error"
    end
    if syntax == 0 then
        name = "Std-Packet"
        if n_bytes > 0 then t:add(G.payload, tvb(p, n_bytes)) end
    elseif syntax == 7 then
        name = "Variable-List-Packet"
        local items = t:add(G.items, tvb(p, n_bytes))
        while p < stop do
            local tag = tvb(p, 1):uint()
            local spec = SG_ITEM[tag]
            if not spec or p + 1 + spec[2] > stop then fail("bad variable-list item"); break end
            local item = items:add(G.item, tvb(p, 1 + spec[2]))
            item:add(G["item.syntax"], tvb(p, 1), (SG_SYNTAX[tag]:gsub("_list", "")))
            item:add(G["item." .. spec[1]], tvb(p + 1, spec[2]))
            p = p + 1 + spec[2]
        end
    elseif syntax >= 1 and syntax <= 6 then
        local spec = SG_ITEM[syntax]
        if n_bytes % spec[2] ~= 0 then
            fail(n_bytes .. " payload bytes are not a whole " .. SG_SYNTAX[syntax])
        elseif meaning == "data" or SG_NEEDS[meaning] ~= syntax then
            name = "Data-Packet"
            sg_list(t, tvb, p, stop, "values", spec[1], spec[2])
        else
            local count = n_bytes / 2
            if meaning == "neighborhood" then
                name = "Neighborhood-Packet"
                sg_list(t, tvb, p, stop, "neighbors", "id", 2)
            elseif meaning == "node-link" then
                if count < 1 then fail("node-link packet without a destination node id") else
                    name = "Node-Link-Packet"
                    t:add(G.destination, tvb(p, 2))
                    sg_list(t, tvb, p + 2, stop, "values", "u16", 2)
                end
            elseif meaning == "coordinates-2d" or meaning == "coordinates-3d" then
                local dims = (meaning == "coordinates-2d") and 2 or 3
                if count % dims ~= 0 then fail(count .. " int16 values are not points") else
                    name = "Coordinates-List-Packet-" .. dims
                    sg_points(t, tvb, p, count / dims, dims, false)
                end
            else
                local dims = (meaning == "trajectory-2d") and 2 or 3
                if count < dims * 2 + 1 or (count - dims) % (dims + 1) ~= 0 then
                    fail(count .. " int16 values are not a " .. dims .. "-D trajectory")
                else
                    name = "Trajectory-Packet-" .. dims
                    sg_points(t, tvb, p, (count - dims) / (dims + 1) + 1, dims, true)
                end
            end
        end
    else
        fail("unknown syntax type " .. syntax)
    end
    t:add(G.type, name):set_generated()
    t:append_text(string.format(" %s from %d", name, tvb(off + 5, 2):uint()))
    return name
end

function spyglass.dissector(tvb, pinfo, tree)
    local len = tvb:len()
    local stream = pinfo.port_type == 2
    local off = 0
    local first = true
    local profile = sg_profile()
    pinfo.cols.protocol = "SpyGlass"
    while off < len do
        local rest = len - off
        if rest < 19 then
            if not stream then break end
            pinfo.desegment_offset, pinfo.desegment_len = off, 19 - rest
            return len
        end
        local size = tvb(off, 2):uint() + 2
        if size < 19 or tvb(off + 2, 1):uint() ~= 2 then
            local t = tree:add(spyglass, tvb(off, rest), "SpyGlass (framing lost)")
            t:add_expert_info(PI_MALFORMED, PI_ERROR, "not a version-2 SpyGlass header")
            return len
        end
        if rest < size then
            if not stream then break end
            pinfo.desegment_offset, pinfo.desegment_len = off, size - rest
            return len
        end
        local name = sg_packet(tvb, tree, off, size, profile)
        info_append(pinfo, name, first)
        first = false
        off = off + size
    end
    return off
end

DissectorTable.get("tcp.port"):add(PORTS.spyglass, spyglass)
DissectorTable.get("udp.port"):add(PORTS.spyglass, spyglass)
