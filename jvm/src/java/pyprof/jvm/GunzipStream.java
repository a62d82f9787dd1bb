package pyprof.jvm;

import java.io.IOException;
import java.io.InputStream;
import java.util.zip.CRC32;
import java.util.zip.DataFormatException;
import java.util.zip.Inflater;

/**
 * The decompressed text of a gzip file (several members too), read in order: a port of Python's
 * {@code pyprof.trace.framing.GunzipStream}, for the trace reader ({@code pyprof.trace.framing}).
 *
 * <p>Unlike {@link java.util.zip.GZIPInputStream}, a stream cut short (a crash while writing) or
 * undecodable from some point gives every byte decoded before that point and then ends, with
 * {@link #truncated()} set, instead of throwing. As in Python (zlib with a gzip header): the
 * header (magic, method 8, no reserved flag, optional extra field, name, comment and header
 * CRC), the deflate data and the trailer (CRC-32 and size) are checked; after a member, text that
 * starts with the gzip magic is the next member, any other text is ignored. The stream is
 * truncated when the input ends inside a member (its header included) or fails a check.
 */
public final class GunzipStream extends InputStream {
  private static final int HEADER = 0;
  private static final int DATA = 1;
  private static final int TRAILER = 2;
  private static final int BETWEEN = 3;

  private final InputStream raw;
  private final Inflater inflater = new Inflater(true);
  private final CRC32 crc = new CRC32();
  /** Input not given to the inflater: in[pos, lim). */
  private byte[] in = new byte[1 << 16];
  private int pos;
  private int lim;
  private int state = HEADER;
  private long size;
  private boolean rawEnded;
  private boolean eof;
  private boolean truncated;

  public GunzipStream(InputStream raw) {
    this.raw = raw;
  }

  /** True once the stream has ended because the gzip input was cut short or undecodable. */
  public boolean truncated() {
    return truncated;
  }

  @Override
  public int read() throws IOException {
    byte[] b = new byte[1];
    return read(b, 0, 1) == 1 ? b[0] & 0xff : -1;
  }

  @Override
  public int read(byte[] b, int off, int len) throws IOException {
    if (len == 0) {
      return 0;
    }
    while (!eof) {
      switch (state) {
        case HEADER: {
          int h = headerLength();
          if (h == -2) {
            fail();
          } else if (h == -1) {
            if (!fill()) {
              end();
            }
          } else {
            pos += h;
            inflater.reset();
            crc.reset();
            size = 0;
            state = DATA;
          }
          break;
        }
        case DATA: {
          if (inflater.needsInput() && (pos < lim || fill())) {
            inflater.setInput(in, pos, lim - pos);
            pos = lim;
          }
          int n;
          try {
            n = inflater.inflate(b, off, len);
          } catch (DataFormatException e) {
            fail();
            break;
          }
          if (n > 0) {
            crc.update(b, off, n);
            size += n;
            return n;
          }
          if (inflater.finished()) {
            pos = lim - inflater.getRemaining();
            state = TRAILER;
          } else if (inflater.needsDictionary()) {
            fail();
          } else if (inflater.needsInput() && rawEnded) {
            end(); // (output the inflater still held has been read: it returned 0)
          }
          break;
        }
        case TRAILER: {
          if (lim - pos < 8) {
            if (!fill()) {
              end();
            }
            break;
          }
          if (le32(pos) != crc.getValue() || le32(pos + 4) != (size & 0xffffffffL)) {
            fail();
            break;
          }
          pos += 8;
          state = BETWEEN;
          break;
        }
        default: { // BETWEEN: the next member, or the end
          if (lim - pos < 2) {
            if (!fill()) {
              eof = true; // nothing, or one byte that starts no member: ignored
            }
            break;
          }
          if ((in[pos] & 0xff) == 0x1f && (in[pos + 1] & 0xff) == 0x8b) {
            state = HEADER;
          } else {
            eof = true; // trailing bytes that start no member: ignored, as gzip does
          }
          break;
        }
      }
    }
    return -1;
  }

  @Override
  public void close() throws IOException {
    inflater.end();
    raw.close();
  }

  /** The input ended: cut short inside a member (its header included), or a clean end. */
  private void end() {
    eof = true;
    truncated = state == HEADER ? lim > pos : state != BETWEEN;
  }

  private void fail() {
    eof = true;
    truncated = true;
  }

  /** Reads more input after in[pos, lim) (only called when the inflater holds none). */
  private boolean fill() throws IOException {
    if (pos > 0) {
      System.arraycopy(in, pos, in, 0, lim - pos);
      lim -= pos;
      pos = 0;
    }
    if (lim == in.length) {
      in = java.util.Arrays.copyOf(in, in.length * 2);
    }
    int n = raw.read(in, lim, in.length - lim);
    if (n < 0) {
      rawEnded = true;
      return false;
    }
    lim += n;
    return true;
  }

  private long le32(int i) {
    return (in[i] & 0xffL) | (in[i + 1] & 0xffL) << 8 | (in[i + 2] & 0xffL) << 16
        | (in[i + 3] & 0xffL) << 24;
  }

  /** The length of the member header at in[pos, lim): -1 when more input is needed, -2 when it
   * is not a gzip header zlib accepts. */
  private int headerLength() {
    int p = pos + 10;
    if (lim < p) {
      return -1;
    }
    int flags = in[pos + 3] & 0xff;
    if ((in[pos] & 0xff) != 0x1f || (in[pos + 1] & 0xff) != 0x8b || in[pos + 2] != 8
        || (flags & 0xe0) != 0) {
      return -2;
    }
    if ((flags & 4) != 0) { // FEXTRA
      if (lim < p + 2) {
        return -1;
      }
      p += 2 + ((in[p] & 0xff) | (in[p + 1] & 0xff) << 8);
      if (lim < p) {
        return -1;
      }
    }
    for (int f : new int[] {8, 16}) { // FNAME, FCOMMENT: zero-terminated
      if ((flags & f) != 0) {
        while (p < lim && in[p] != 0) {
          p++;
        }
        if (p == lim) {
          return -1;
        }
        p++;
      }
    }
    if ((flags & 2) != 0) { // FHCRC: the low 16 bits of the header's CRC-32
      if (lim < p + 2) {
        return -1;
      }
      CRC32 h = new CRC32();
      h.update(in, pos, p - pos);
      if ((h.getValue() & 0xffff) != ((in[p] & 0xff) | (in[p + 1] & 0xff) << 8)) {
        return -2;
      }
      p += 2;
    }
    return p - pos;
  }
}
