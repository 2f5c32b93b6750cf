"""What gpustrata prints: plan text, pull-request markdown, serving side by side, capacity,
compare, the SVG diagram and the generated reference docs."""
