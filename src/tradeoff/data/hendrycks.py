"""The common corruptions of Hendrycks & Dietterich (ICLR 2019): their names, in their order (noise, blur, weather,
digital), and their severities. Tiny-ImageNet-C is stored this way; digits-c builds the same sets for 8x8 digits."""

CORRUPTIONS = (
    "gaussian_noise", "shot_noise", "impulse_noise",
    "defocus_blur", "glass_blur", "motion_blur", "zoom_blur",
    "snow", "frost", "fog", "brightness",
    "contrast", "elastic_transform", "pixelate", "jpeg_compression",
)
SEVERITIES = (1, 2, 3, 4, 5)
