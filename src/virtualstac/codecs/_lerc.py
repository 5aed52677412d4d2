"""LERC (TIFF compression 34887) decoded as libtiff decodes it, validity masks included.

A LERC blob may carry a validity mask, which GDAL writes for the NaN pixels of float images
and for the alpha band of 8-bit RGBA images. libtiff (and so GDAL and rasterio) gives masked
float pixels the value NaN, turns the mask of an 8-bit image back into its alpha band, and
refuses masks on other integer samples. imagecodecs' numcodecs twin drops the mask, so masked
pixels read as whatever LERC left there (0), and a pixel-interleaved image stored with one
mask per band comes back band after band. :class:`LERCCodec` keeps the twin's name and
configuration (so stores stay readable by other ``imagecodecs_lerc`` readers) and decodes the
mask as libtiff does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import imagecodecs
import imagecodecs.numcodecs as icn
import numpy as np

from virtualstac.codecs._bytes import _as_bytes, _ImageCodec
from virtualstac.manifests.decoders import decoded_bound

if TYPE_CHECKING:
    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import Buffer

__all__ = ["LERCCodec"]

_ALPHA_OPAQUE = 255


class LERCCodec(_ImageCodec):
    """LERC (TIFF compression 34887): ``imagecodecs_lerc``, masked pixels decoded as libtiff
    decodes them (NaN for floats, the alpha band of 8-bit images)."""

    codec_name = "imagecodecs_lerc"
    numcodecs_class = icn.Lerc

    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        data = chunk_bytes.as_numpy_array()
        # LERC allocates what its headers claim: a 2 KiB blob can claim 2**31 rows.
        bound, claimed = decoded_bound(chunk_spec), _lerc_claimed_bytes(data.tobytes())
        if bound is not None and claimed > bound:
            raise ValueError(
                f"the LERC headers claim {claimed:,} bytes, more than the chunk's {bound:,}"
            )
        image, masks = imagecodecs.lerc_decode(data, masks=True)
        image = libtiff_image(image, masks, chunk_spec.shape)
        return chunk_spec.prototype.buffer.from_array_like(_as_bytes(image))


# Lerc2 data types (char, byte, short, ushort, int, uint, float, double) -> bytes per value.
_LERC_VALUE_BYTES = (1, 1, 2, 2, 4, 4, 4, 8)


def _lerc_claimed_bytes(blob: bytes) -> int:
    """The bytes the Lerc2 headers of ``blob`` (one per band) claim their values take; 0 for
    what is not Lerc2, left to the decoder to refuse."""
    claimed, at = 0, 0
    while blob.startswith(b"Lerc2 ", at) and at + 14 <= len(blob):
        version = int.from_bytes(blob[at + 6 : at + 10], "little", signed=True)
        fields = at + (14 if version >= 3 else 10)  # a checksum from version 3
        count = 7 if version >= 4 else 6  # the number of dimensions from version 4
        if fields + 4 * count > len(blob):
            break
        values = [
            int.from_bytes(blob[fields + 4 * n : fields + 4 * n + 4], "little", signed=True)
            for n in range(count)
        ]
        rows, columns, *rest = values
        dimensions = rest[0] if version >= 4 else 1
        blob_size, data_type = rest[-2], rest[-1]
        if not 0 <= data_type < len(_LERC_VALUE_BYTES) or blob_size <= 0:
            break
        claimed += (
            max(rows, 0) * max(columns, 0) * max(dimensions, 1) * (_LERC_VALUE_BYTES[data_type])
        )
        at += blob_size
    return claimed


def libtiff_image(
    image: np.ndarray[Any, Any], masks: np.ndarray[Any, Any] | None, shape: tuple[int, ...]
) -> np.ndarray[Any, Any]:
    """The pixels libtiff makes of a decoded LERC ``image`` and its validity ``masks`` (None:
    every pixel valid), for a chunk stored as ``shape`` (``(rows, columns, samples)`` when
    pixel-interleaved)."""
    if _lacks_alpha(image, shape):
        alpha = np.full(image.shape[:2], _ALPHA_OPAQUE, np.uint8)
        if masks is not None:
            alpha[~masks] = 0
        return np.concatenate([image.reshape(*image.shape[:2], -1), alpha[..., None]], axis=-1)
    if masks is None:
        return image
    if image.dtype.kind != "f":
        raise ValueError(
            f"the LERC blob masks pixels of {image.dtype} samples, which GDAL does not read "
            "either (it masks floats and the alpha band of 8-bit images only)"
        )
    if masks.ndim == 3:
        # One mask per band: GDAL stored the bands of pixel-interleaved samples one by one.
        image, masks = np.moveaxis(image, 0, -1), np.moveaxis(masks, 0, -1)
    elif image.ndim == 3:
        masks = masks[..., None]  # one mask for every sample of a pixel
    return np.where(masks, image, np.array(np.nan, image.dtype))


def _lacks_alpha(image: np.ndarray[Any, Any], shape: tuple[int, ...]) -> bool:
    """Whether ``image`` is an 8-bit pixel-interleaved chunk without its last sample: GDAL
    stores the alpha band of such images as the LERC mask (absent when all opaque)."""
    if image.dtype != np.uint8 or len(shape) != 3 or image.shape[1:2] != shape[1:2]:
        return False
    samples = image.shape[2] if image.ndim == 3 else 1
    return samples == shape[2] - 1
