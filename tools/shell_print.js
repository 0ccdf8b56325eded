/*
 * shell_print.js -- how the shell prints values, in mongosh's way (which
 * is Node's util.inspect with mongosh's printers for the BSON types):
 *
 *   { _id: ObjectId('5f1d...'), n: 1, s: 'text', d: ISODate('2020-...') }
 *   Long('5')  Int32(5)  Decimal128('1.5')  Timestamp({ t: 1, i: 2 })
 *   Binary.createFromBase64('AQID', 0)  UUID('...')  /ab+c/i  MinKey()
 *
 * An object or array goes on one line when it fits in 80 columns and has
 * fewer than three levels of nesting below it; otherwise one entry per
 * line, indented by two.  An array of more than six short entries is laid
 * out in columns.  printjson() prints every level expanded, as mongosh's
 * does.  Keys that are not identifiers ('a.b', '$match') are quoted.  With colours (a terminal): strings green, numbers and
 * booleans yellow, null bold, undefined grey, regular expressions red,
 * functions cyan; inside ObjectId('...'), Long('...') and the like the
 * string or number is coloured, and ISODate('...') is not (mongosh's
 * colours, checked against mongosh 2.12 on a terminal).
 *
 * Part of the shell's prelude (tools/shell_js.c compiles it in, before
 * shell_api.js); it defines the global __fmt.
 */
var __fmt = (function () {
    var BREAK = 80;
    var MINKEY = MinKey, MAXKEY = MaxKey; /* the values (shell_api.js wraps the names) */
    var STYLE = {
        string: ['32', '39'], number: ['33', '39'], boolean: ['33', '39'],
        null: ['1', '22'], undefined: ['90', '39'], date: ['35', '39'],
        regexp: ['31', '39'], special: ['36', '39']
    };

    function paint(o, text, style) {
        if (!o.colors)
            return text;
        var s = STYLE[style];
        return '\x1b[' + s[0] + 'm' + text + '\x1b[' + s[1] + 'm';
    }

    function width(s) {
        return s.replace(/\x1b\[[0-9;]*m/g, '').length;
    }

    function repeat(ch, n) {
        var s = '';
        while (n-- > 0)
            s += ch;
        return s;
    }

    /* A string literal: single quotes unless the text holds one. */
    function quote(s) {
        var q = "'";
        if (s.indexOf("'") >= 0) {
            if (s.indexOf('"') < 0)
                q = '"';
            else if (s.indexOf('`') < 0)
                q = '`';
        }
        var out = q;
        for (var i = 0; i < s.length; i++) {
            var ch = s.charAt(i), c = s.charCodeAt(i);
            if (ch === q || ch === '\\')
                out += '\\' + ch;
            else if (ch === '\n')
                out += '\\n';
            else if (ch === '\t')
                out += '\\t';
            else if (ch === '\r')
                out += '\\r';
            else if (c < 0x20 || c === 0x7f)
                out += '\\x' + (c < 16 ? '0' : '') + c.toString(16).toUpperCase();
            else
                out += ch;
        }
        return out + q;
    }

    function key(o, k) {
        return /^[A-Za-z_][A-Za-z0-9_]*$/.test(k) ? k : paint(o, quote(k), 'string');
    }

    function str(o, s) {
        return paint(o, quote(s), 'string');
    }

    function num(o, n) {
        return paint(o, n === 0 && 1 / n < 0 ? '-0' : String(n), 'number');
    }

    /* The inside of a Long/Decimal's toString: NumberLong("5") -> 5. */
    function inner(s) {
        var m = /^[A-Za-z]+\("?([^"]*)"?\)$/.exec(s);
        return m ? m[1] : s;
    }

    function hex(b64) {
        var A = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
        var bits = 0, acc = 0, out = '';
        for (var i = 0; i < b64.length && b64.charAt(i) !== '='; i++) {
            acc = (acc << 6) | A.indexOf(b64.charAt(i));
            bits += 6;
            if (bits >= 8) {
                bits -= 8;
                var v = (acc >> bits) & 255;
                out += (v < 16 ? '0' : '') + v.toString(16);
            }
        }
        return out;
    }

    /* The BSON types and other values that print as one word (no
     * entries); null when v is a plain object or array. */
    function scalar(v, o) {
        if (v === undefined)
            return paint(o, 'undefined', 'undefined');
        if (v === null)
            return paint(o, 'null', 'null');
        switch (typeof v) {
        case 'number': return num(o, v);
        case 'boolean': return paint(o, String(v), 'boolean');
        case 'string': return str(o, v);
        case 'function':
            return paint(o, '[Function' + (v.name ? ': ' + v.name : ' (anonymous)') + ']',
                         'special');
        }
        if (typeof v.__shellName === 'function')
            return v.__shellName();
        if (v instanceof Date)
            return isNaN(v.getTime()) ? paint(o, 'Invalid Date', 'date')
                                      : "ISODate('" + v.toISOString() + "')";
        if (v instanceof RegExp || v instanceof BSONRegExp)
            return paint(o, String(v), 'regexp');
        if (v instanceof ObjectId)
            return 'ObjectId(' + str(o, v.str) + ')';
        if (v instanceof NumberLong)
            return 'Long(' + str(o, inner(v.toString())) + ')';
        if (v instanceof NumberInt)
            return 'Int32(' + num(o, v.toNumber()) + ')';
        if (v instanceof NumberDecimal)
            return 'Decimal128(' + str(o, inner(v.toString())) + ')';
        if (v instanceof Timestamp)
            return 'Timestamp({ t: ' + num(o, v.t) + ', i: ' + num(o, v.i) + ' })';
        if (v instanceof BinData) {
            var h = hex(v.base64());
            if (v.subtype() === 4 && h.length === 32)
                return 'UUID(' + str(o, h.substr(0, 8) + '-' + h.substr(8, 4) + '-' +
                                    h.substr(12, 4) + '-' + h.substr(16, 4) + '-' +
                                    h.substr(20)) + ')';
            return 'Binary.createFromBase64(' + str(o, v.base64()) + ', ' +
                   num(o, v.subtype()) + ')';
        }
        if (v === MINKEY)
            return 'MinKey()';
        if (v === MAXKEY)
            return 'MaxKey()';
        if (v instanceof Code)
            return 'Code(' + str(o, v.code) + (v.scope ? ', ' + fmt(v.scope, o, 0, []) : '') +
                   ')';
        if (v instanceof DBPointer)
            return 'DBPointer(' + str(o, String(v.ns)) + ', ' + fmt(v.id, o, 0, []) + ')';
        if (v instanceof Error)
            return v.name + ': ' + v.message;
        return null;
    }

    /* Entries of more than six short items, in columns (Node's rule: as
     * many columns as make the block roughly 2.5 times wider than high,
     * at most 15 and within 80 columns; numbers right-aligned). */
    function columns(out, v, indent) {
        var total = 0, max = 0, lens = [];
        for (var i = 0; i < out.length; i++) {
            lens[i] = width(out[i]);
            total += lens[i] + 2;
            if (lens[i] > max)
                max = lens[i];
        }
        var amax = max + 2;
        if (!(amax * 3 + indent < BREAK && (total / amax > 5 || max <= 6)))
            return out;
        var bias = Math.sqrt(amax - total / out.length);
        var bmax = Math.max(amax - 3 - bias, 1);
        var ncol = Math.min(Math.round(Math.sqrt(2.5 * bmax * out.length) / bmax),
                            Math.floor((BREAK - indent) / amax), 12, 15);
        if (ncol <= 1)
            return out;
        var colw = [];
        for (var c = 0; c < ncol; c++) {
            var w = 0;
            for (var j = c; j < out.length; j += ncol)
                if (lens[j] > w)
                    w = lens[j];
            colw.push(w + 2);
        }
        var right = true;
        for (i = 0; i < v.length; i++)
            if (typeof v[i] !== 'number')
                right = false;
        var rows = [];
        for (i = 0; i < out.length; i += ncol) {
            var line = '', end = Math.min(i + ncol, out.length);
            for (j = i; j < end; j++) {
                var cell = j < end - 1 ? out[j] + ', ' : out[j];
                var pad = repeat(' ', colw[j - i] - lens[j] - (j < end - 1 ? 2 : 2));
                if (j === end - 1 && !right)
                    pad = '';
                line += right ? pad + cell : cell + pad;
            }
            rows.push(line);
        }
        return rows;
    }

    /* v formatted at indentation `indent`; seen: the objects above it.
     * Returns the text; fmt.height is the nesting below it. */
    function fmt(v, o, indent, seen) {
        fmt.height = 0;
        var s = scalar(v, o);
        if (s !== null)
            return s;
        if (seen.indexOf(v) >= 0)
            return paint(o, '[Circular]', 'special');
        var arr = Array.isArray(v);
        var keys = arr ? null : Object.keys(v);
        var n = arr ? v.length : keys.length;
        if (n === 0)
            return arr ? '[]' : '{}';
        if (seen.length >= 20)
            return paint(o, arr ? '[Array]' : '[Object]', 'special');
        seen.push(v);
        var out = [], height = 0;
        for (var i = 0; i < n; i++) {
            var e = arr ? fmt(v[i], o, indent + 2, seen)
                        : key(o, keys[i]) + ': ' + fmt(v[keys[i]], o, indent + 2, seen);
            if (fmt.height + 1 > height && !(fmt.height === 0 && !isNested(arr ? v[i] : v[keys[i]])))
                height = fmt.height + 1;
            out.push(e);
        }
        seen.pop();
        var open = arr ? '[' : '{', close = arr ? ']' : '}';
        var grouped = arr && n > 6 && !o.expand ? columns(out, v, indent) : out;
        var text;
        if (!o.expand && grouped === out && height < 3 && fits(out, indent) &&
            out.join(', ').indexOf('\n') < 0) {
            text = open + ' ' + out.join(', ') + ' ' + close;
        } else {
            var pad = '\n' + repeat(' ', indent);
            text = open + pad + '  ' + grouped.join(',' + pad + '  ') + pad + close;
        }
        fmt.height = height;
        return text;
    }

    function isNested(v) {
        return v !== null && typeof v === 'object' && scalar(v, {}) === null &&
               (Array.isArray(v) ? v.length > 0 : Object.keys(v).length > 0);
    }

    /* Node's isBelowBreakLength for entries `out` at `indent`. */
    function fits(out, indent) {
        var start = out.length + indent + 1 + 10;
        var total = out.length + start;
        if (total + out.length > BREAK)
            return false;
        for (var i = 0; i < out.length; i++) {
            total += width(out[i]);
            if (total > BREAK)
                return false;
        }
        return true;
    }

    /* What the shell prints for a result: strings as they are.  expand:
     * every non-empty object and array one entry per line (printjson). */
    function show(v, colors, expand) {
        var o = {colors: !!colors, expand: !!expand};
        if (typeof v === 'string')
            return v;
        return fmt(v, o, 0, []);
    }

    /* print()'s arguments: strings as they are, the rest formatted. */
    function args(a, colors) {
        var parts = [];
        for (var i = 0; i < a.length; i++)
            parts.push(show(a[i], colors));
        return parts.join(' ');
    }

    function red(text, colors) {
        return colors ? '\x1b[31m' + text + '\x1b[39m' : text;
    }

    return {show: show, args: args, quote: quote, red: red};
})();
